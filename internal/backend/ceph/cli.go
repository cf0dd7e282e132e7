package ceph

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"rekey.io/rekey/internal/engine"
)

// session is one operation's connection to the cluster: a private folder
// holding the ceph.conf built from the spec and the admin keyring, removed
// when the operation ends, so keys spend as little time on disk as
// possible and never appear on a command line.
type session struct {
	b     *Backend
	dir   string
	conf  string
	admin Keyring
	// adminFile is the keyring the admin's commands read: step 6 of the
	// admin rotation rewrites it, so later commands of the same operation
	// use the new key.
	adminFile string
	seq       int
}

// open loads the admin keyring from the store and prepares the folder.
func (b *Backend) open(ctx context.Context) (*session, error) {
	text, err := b.Store.LoadAdmin(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the admin keyring: %w", err)
	}
	admin, err := parseKeyringFor(text, b.admin)
	if err != nil {
		return nil, fmt.Errorf("admin keyring: %w", err)
	}
	// The spec's values are checked again before every operation: a
	// Backend changed after New must not get a hostile cap to the CLI
	// half way through (after an ownership record was written).
	for _, e := range b.entities {
		if err := validateEntityCaps(e); err != nil {
			return nil, err
		}
		if !validEntity(e.Name) {
			return nil, fmt.Errorf("entity %q is not an entity name", e.Name)
		}
	}
	if !ownerUID.MatchString(b.Owner.UID) {
		return nil, errors.New("ceph backend: no owner (the CredentialSet's UID) to record entities for")
	}
	workDir := b.WorkDir
	if workDir == "" {
		workDir = os.TempDir()
	}
	sweepWorkDir(workDir)
	dir, err := os.MkdirTemp(workDir, workFolderPattern())
	if err != nil {
		return nil, err
	}
	s := &session{b: b, dir: dir, conf: filepath.Join(dir, "ceph.conf"), admin: admin}
	if err := writePrivate(s.conf, b.conf); err != nil {
		s.close()
		return nil, err
	}
	if err := s.setAdmin(admin.Key); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *session) close() { os.RemoveAll(s.dir) }

// setAdmin points the admin's later commands at key.
func (s *session) setAdmin(key string) error {
	s.admin.Key = key
	s.adminFile = filepath.Join(s.dir, "admin.keyring")
	return writePrivate(s.adminFile, s.admin.String())
}

// writePrivate writes through a temporary name so that a reader (the CLI
// of a concurrent command) never sees half a keyring.
func writePrivate(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// run runs a ceph command as the admin. The admin's key refused, or its
// caps refusing the command, is a refusal a person must act on (see
// adminError); errors.Is still tells ErrAuthFailed and ErrDenied.
func (s *session) run(ctx context.Context, args ...string) ([]byte, error) {
	out, err := s.exec(ctx, s.admin.Entity, s.adminFile, "", args)
	return out, s.b.adminError(s.admin.Entity, err)
}

// runAs runs a ceph command as kr's entity, through a keyring file that
// lives only for this command.
func (s *session) runAs(ctx context.Context, kr Keyring, args ...string) ([]byte, error) {
	s.seq++
	file := filepath.Join(s.dir, "as-"+strconv.Itoa(s.seq)+".keyring")
	if err := writePrivate(file, kr.String()); err != nil {
		return nil, err
	}
	defer os.Remove(file)
	return s.exec(ctx, kr.Entity, file, kr.Key, args)
}

// exec runs the CLI; key is redacted from errors besides the admin's.
func (s *session) exec(ctx context.Context, entity, keyring, key string, args []string) ([]byte, error) {
	b := s.b
	words, opts := splitArgs(args)
	if err := checkArgs(words); err != nil {
		return nil, err
	}
	if !validEntity(entity) {
		return nil, fmt.Errorf("ceph %s: refused to run as %q: not an entity name", commandName(words), entity)
	}
	if b.Fence != nil && changesCluster(words) {
		if err := b.Fence(ctx); err != nil {
			return nil, err
		}
	}
	if b.Term != 0 && changesCluster(words) && !isTermWrite(words) {
		if err := s.checkTerm(ctx, entity, keyring, key); err != nil {
			return nil, err
		}
	}
	// The command words come after "--": the CLI's own parser and librados'
	// stop reading options there (checked against Tentacle's CLI in the
	// cluster tests), so even a word that slipped past checkArgs would stay
	// a word of the mon command.
	full := append([]string{"-c", s.conf, "--connect-timeout", strconv.Itoa(int(b.connectTimeout().Seconds())),
		"-n", entity, "-k", keyring}, opts...)
	full = append(append(full, "--"), words...)
	// The connect timeout bounds the hunt for a mon; this bounds a mon that
	// accepted the session and then hangs.
	cctx, cancel := context.WithTimeout(ctx, b.connectTimeout()+b.commandTimeout())
	defer cancel()
	cmd := exec.CommandContext(cctx, b.cli, full...)
	cmd.Env = cleanEnv()
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("ceph %s: %w", commandName(args), ctx.Err())
	}
	ce := &CommandError{Command: commandName(args), As: entity, Code: -1,
		Detail: sanitize(stderr.String(), s.admin.Key, key)}
	var xe *exec.ExitError
	switch {
	case cctx.Err() != nil && authRefused(stderr.String()):
		// Killed while retrying a refused key: not a network problem.
		ce.kind = ErrAuthFailed
	case cctx.Err() != nil:
		ce.kind, ce.Detail = errTimedOut, "no answer in "+(b.connectTimeout()+b.commandTimeout()).String()
	case errors.As(err, &xe):
		ce.Code = xe.ExitCode()
		ce.kind = classify(ce.Code, stderr.String())
	default:
		// The CLI did not start: a wrong --ceph-cli is the manager's
		// configuration error.
		return nil, fmt.Errorf("run %s: %w", b.cli, err)
	}
	if ce.kind == errTimedOut {
		return nil, &engine.UnreachableError{Instance: strings.Join(b.monitors, ","), Err: ce}
	}
	return nil, ce
}

// splitArgs separates a command's words from the output options rekey's
// callers add after them; only "--format json" exists, anything else is a
// programming error and refused.
func splitArgs(args []string) (words, opts []string) {
	i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "-") })
	if i < 0 {
		return args, nil
	}
	if slices.Equal(args[i:], []string{"--format", "json"}) {
		return args[:i], args[i:]
	}
	// Left in words, where checkArgs refuses them.
	return args, nil
}

// cleanEnv is the manager's environment without the variables through which
// the ceph CLI would take another cluster's config, keyring or arguments.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "CEPH_ARGS", "CEPH_CONF", "CEPH_KEYRING":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// monAddr is the CRD's pattern for a mon_host entry.
var monAddr = regexp.MustCompile(`^(v[12]:)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?)(:[0-9]{1,5})?$`)

// buildConf is the ceph.conf of rekey's commands: the spec's monitors and
// options. It holds no path (the test CLI runs in a chroot that sees paths
// differently) and no key.
func buildConf(monitors []string, options map[string]string) (string, error) {
	var b strings.Builder
	b.WriteString("[global]\n")
	names := make([]string, 0, len(options))
	for k := range options {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if err := ValidateConfig(k, options[k]); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s = %s\n", k, options[k])
	}
	if len(monitors) == 0 {
		return "", errors.New("no monitors")
	}
	for _, m := range monitors {
		if !monAddr.MatchString(m) {
			return "", fmt.Errorf("monitor %q is not an address", m)
		}
	}
	fmt.Fprintf(&b, "mon_host = %s\n", strings.Join(monitors, ","))
	return b.String(), nil
}

// changesCluster: the command creates, rotates or deletes a key, changes
// caps, or writes rekey's ownership records.
func changesCluster(words []string) bool {
	if len(words) < 2 {
		return false
	}
	switch words[0] {
	case "auth":
		return words[1] != "get" && words[1] != "ls" && words[1] != "list" && words[1] != "export" && words[1] != "print-key" && words[1] != "print_key"
	case "config-key":
		return words[1] == "set" || words[1] == "put" || words[1] == "rm" || words[1] == "del"
	}
	return false
}
