package ceph

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

var (
	// ErrAuthFailed: the monitor refused the entity's key (or the entity
	// cannot open a session at all: without mon caps Ceph answers the
	// same way). Distinct from ErrDenied, which needs a valid key.
	ErrAuthFailed = errors.New("cephx authentication failed")
	// ErrDenied: authenticated, but the entity's caps do not allow the
	// command.
	ErrDenied = errors.New("access denied by the entity's caps")
	// ErrNotFound: the entity does not exist.
	ErrNotFound = errors.New("no such entity")
	// errTimedOut: no monitor answered in time; surfaced as
	// *engine.UnreachableError.
	errTimedOut = errors.New("no monitor answered")
)

// CommandError is a failed ceph command. It names the command by its
// leading words (never an option's value) and carries only the Ceph error
// name or number the CLI reported (sanitize).
type CommandError struct {
	Command string // e.g. "auth get client.csi"
	As      string // the entity the command ran as
	Code    int    // exit status, -1 when it did not exit
	Detail  string
	kind    error
}

func (e *CommandError) Error() string {
	s := fmt.Sprintf("ceph %s (as %s)", e.Command, e.As)
	if e.kind != nil {
		s += ": " + e.kind.Error()
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *CommandError) Unwrap() error { return e.kind }

// classify tells the failures apart by what the ceph CLI prints (checked
// against Tentacle's CLI in the tests): a refused key ends the session
// setup with EACCES and "error connecting to the cluster"; refused caps
// come back from a live session as "Error EACCES"; a keyring the client
// cannot use leaves it retrying auth until it gives up, like an absent mon,
// but after logging a parse error or an auth request refused locally; a
// key the monitors refuse while the client hunts among several of them
// (or retries) is logged as handle_auth_bad_method and can end in a
// timeout. A refused key is told as such whatever the CLI ends with: a
// timeout then says nothing about the network, and the key will not start
// working by waiting.
func classify(code int, stderr string) error {
	switch {
	case code == 13 && strings.Contains(stderr, "error connecting to the cluster"),
		authRefused(stderr):
		return ErrAuthFailed
	case code == 13:
		return ErrDenied
	case code == 2 && strings.Contains(stderr, "ENOENT"):
		return ErrNotFound
	case strings.Contains(stderr, "timed out"):
		return errTimedOut
	}
	return nil
}

// authMarkers are what the CLI logs when cephx refuses its key, or when
// it cannot use its keyring at all.
var authMarkers = []string{
	"handle_auth_bad_method",
	"error parsing file",
	"get_initial_auth_request returned -13",
	"auth: unable to find a keyring",
}

// authRefused reports whether stderr shows the key refused, whatever the
// command ended with.
func authRefused(stderr string) bool {
	for _, m := range authMarkers {
		if strings.Contains(stderr, m) {
			return true
		}
	}
	return false
}

// keyShaped matches a base64 run as long as a cephx key: the tests check
// that nothing rekey reports holds one.
var keyShaped = regexp.MustCompile(`[A-Za-z0-9+/]{24,}={0,2}`)

// errorName matches the error names and numbers the CLI reports ("Error
// EINVAL: ...", "[errno 13] RADOS permission denied ...").
var errorName = regexp.MustCompile(`\bError (E[A-Z]{2,15})\b|\[errno (\d{1,4})\]`)

// sanitize keeps of ceph's answer only the Ceph error name or number it
// reports. The message around it is the monitor's (or whatever answers at
// the address the spec names), and log lines quote keys; none of it is
// repeated. The secrets are ignored: nothing of stderr survives but a name.
func sanitize(stderr string, _ ...string) string {
	var names []string
	for _, m := range errorName.FindAllStringSubmatch(stderr, 4) {
		n := m[1]
		if n == "" {
			n = "errno " + m[2]
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// commandName is the leading words of a ceph command, enough to tell which
// call failed: entity names and subcommands, never caps or a flag's value.
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

// adminFailure is an admin command the cluster refused for the admin's
// credential: both the refusal the controller reports and the
// CommandError rekey's own decisions look at.
type adminFailure struct {
	refusal *engine.Refusal
	cause   error
}

func (e *adminFailure) Error() string   { return e.refusal.Error() }
func (e *adminFailure) Unwrap() []error { return []error{e.refusal, e.cause} }

// adminError turns a refused admin key into AuthenticationFailed and
// refused admin caps into PermissionDenied, naming the entity, the
// monitors and the Secret key; other errors pass unchanged. A refused key
// never starts working by waiting: it was rotated or deleted in the
// cluster (by a person, or by another set that rotates the same admin), or
// the Secret holds another key.
func (b *Backend) adminError(entity string, err error) error {
	var msg string
	r := reason.AuthenticationFailed
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrAuthFailed):
		msg = fmt.Sprintf("the monitors %s refused the key of %s in %s (cephx authentication failed); nothing was changed: the key was rotated or deleted in the cluster (by a person, or by another CredentialSet that rotates %s), or the Secret holds another entity's key. Put %s's current keyring there (ceph auth get %s)",
			strings.Join(b.monitors, ","), entity, b.adminSecret(), entity, entity, entity)
	case errors.Is(err, ErrDenied):
		r = reason.PermissionDenied
		msg = fmt.Sprintf("the monitors %s refused a command of %s (%s: EACCES, its caps do not allow it); nothing was changed: give %s the caps rekey's admin needs (mon 'allow *')",
			strings.Join(b.monitors, ","), entity, commandOf(err), entity)
	default:
		return err
	}
	return &adminFailure{refusal: &engine.Refusal{Reason: string(r), Message: msg}, cause: err}
}

// adminSecret names where the admin's keyring comes from.
func (b *Backend) adminSecret() string {
	if b.adminRef.Name == "" {
		return "the admin keyring Secret"
	}
	return fmt.Sprintf("Secret %s key %s (spec.ceph.admin.keyringSecretRef)", b.adminRef.Name, b.adminRef.Key)
}

// commandOf is the ceph command err is about, e.g. "ceph auth ls".
func commandOf(err error) string {
	var ce *CommandError
	if errors.As(err, &ce) {
		return "ceph " + ce.Command
	}
	return "a ceph command"
}
