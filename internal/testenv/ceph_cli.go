package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ErrCephAuth means the monitor refused the entity's key: cephx
// authentication failed, as opposed to a command its caps do not allow.
var ErrCephAuth = errors.New("ceph: authentication failed")

// cephConnectTimeout bounds the CLI's hunt for a monitor: a wrong address or
// a stopped mon fails in seconds instead of hanging.
const cephConnectTimeout = "10"

// cephCLITimeout applies when the caller's context has no deadline.
const cephCLITimeout = 60 * time.Second

// CLI runs the chroot's ceph CLI as client.admin and returns its stdout. Ask
// for JSON with "--format", "json" in args.
func (c *Ceph) CLI(ctx context.Context, args ...string) ([]byte, error) {
	return c.cli(ctx, append([]string{"-n", "client.admin", "-k", c.AdminKeyring.Chroot}, args...), args)
}

// CLIAs runs the ceph CLI as entity (e.g. client.smoke) authenticated with
// key. The error wraps ErrCephAuth when the monitor rejects the key.
func (c *Ceph) CLIAs(ctx context.Context, entity, key string, args ...string) ([]byte, error) {
	// The key goes through a keyring file, not --key, so it never shows in
	// the process list.
	f, err := os.CreateTemp(c.Dir.Host, "as-*.keyring")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	_, err = fmt.Fprintf(f, "[%s]\n\tkey = %s\n", entity, key)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	keyring := filepath.Join(c.Dir.Chroot, filepath.Base(f.Name()))
	return c.cli(ctx, append([]string{"-n", entity, "-k", keyring}, args...), args)
}

// Authenticates reports whether the monitor accepts key for entity, by
// running a real command as it: a command its caps refuse still proves the
// key.
func (c *Ceph) Authenticates(ctx context.Context, entity, key string) (bool, error) {
	_, err := c.CLIAs(ctx, entity, key, "auth", "ls")
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrCephAuth):
		return false, nil
	case strings.Contains(err.Error(), "EACCES") || strings.Contains(err.Error(), "access denied"):
		return true, nil
	}
	return false, fmt.Errorf("ceph auth ls as %s: %w", entity, err)
}

// Key is the entity's current key, read with ceph auth get.
func (c *Ceph) Key(ctx context.Context, entity string) (string, error) {
	out, err := c.CLI(ctx, "auth", "get", entity, "--format", "json")
	if err != nil {
		return "", err
	}
	var entries []struct {
		Entity string `json:"entity"`
		Key    string `json:"key"`
	}
	if err := json.Unmarshal(out, &entries); err != nil {
		return "", fmt.Errorf("ceph auth get %s: unreadable output: %w", entity, err)
	}
	if len(entries) != 1 || entries[0].Entity != entity || entries[0].Key == "" {
		return "", fmt.Errorf("ceph auth get %s: %d entries, none with a key for it", entity, len(entries))
	}
	return entries[0].Key, nil
}

// cli runs ceph with full (identity included) arguments; shown are the
// caller's arguments, used only to name the command in errors.
func (c *Ceph) cli(ctx context.Context, full, shown []string) ([]byte, error) {
	args := append([]string{"-c", c.Conf.Chroot, "--connect-timeout", cephConnectTimeout}, full...)
	out, err := c.env.chrootRun(ctx, "/usr/bin/ceph", args...)
	var ee *exitError
	if errors.As(err, &ee) && ee.code == int(syscall.EACCES) &&
		strings.Contains(ee.stderr, "error connecting to the cluster") {
		return nil, fmt.Errorf("ceph %s as %s: %w", commandName(shown), full[1], ErrCephAuth)
	}
	if err != nil {
		return nil, fmt.Errorf("ceph %s: %w", commandName(shown), err)
	}
	return out, nil
}

type exitError struct {
	code   int
	stderr string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d: %s", e.code, e.stderr) }

// chrootRun runs a program of the sid chroot to completion and returns its
// stdout. Errors carry stderr (ceph's error message) but never stdout,
// which may hold keys.
func (e *Env) chrootRun(ctx context.Context, path string, args ...string) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cephCLITimeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, path, args...)
	// A host CEPH_ARGS or CEPH_CONF must not redirect the tools.
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: e.SidDir, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), ctx.Err())
	}
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		return nil, &exitError{code: xe.ExitCode(), stderr: strings.TrimSpace(stderr.String())}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return stdout.Bytes(), nil
}

// commandName is the leading words of a ceph command, e.g. "auth rotate
// client.x": enough to tell which call failed, never an option's value.
func commandName(args []string) string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || len(words) == 3 {
			break
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// writeCLIWrapper writes CLIPath. The CLI runs inside the chroot, so host
// paths in its arguments (a keyring written under SidDir, -i, -o) are
// rewritten to the chroot's view; paths outside SidDir cannot be seen and
// relative paths resolve against the chroot's /. It presets -c and a connect
// timeout; a later --connect-timeout in the caller's arguments wins.
func (c *Ceph) writeCLIWrapper() error {
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		return err
	}
	script := `#!/bin/sh
# Generated by rekey's internal/testenv for the cluster in this folder.
sid=` + shellQuote(c.env.SidDir) + `
for a; do
	shift
	case $a in
	"$sid"/*) a=${a#"$sid"} ;;
	--*=*) v=${a#*=}; case $v in "$sid"/*) a=${a%%=*}=${v#"$sid"} ;; esac ;;
	esac
	set -- "$@" "$a"
done
exec ` + shellQuote(chroot) + ` "$sid" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
	/usr/bin/ceph -c ` + shellQuote(c.Conf.Chroot) + ` --connect-timeout ` + cephConnectTimeout + ` "$@"
`
	return os.WriteFile(c.CLIPath, []byte(script), 0o755)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
