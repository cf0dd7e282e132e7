package ceph

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
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
// leading words (never an option's value) and carries ceph's own message
// stripped of log lines and anything shaped like a key.
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
// but after logging a parse error or an auth request refused locally.
func classify(code int, stderr string) error {
	switch {
	case code == 13 && strings.Contains(stderr, "error connecting to the cluster"),
		strings.Contains(stderr, "error parsing file"),
		strings.Contains(stderr, "get_initial_auth_request returned -13"):
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

// logLine matches the timestamped lines of Ceph's logging. They are
// debugging output, and the keyring parser quotes the key it rejects in
// them.
var logLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:`)

// keyShaped matches a base64 run as long as a cephx key; no word of an
// error message ceph prints is like that.
var keyShaped = regexp.MustCompile(`[A-Za-z0-9+/]{24,}={0,2}`)

const maxDetail = 400

// sanitize keeps ceph's error message and drops what could leak a key:
// log lines, key-shaped runs, and the secrets the caller names.
func sanitize(stderr string, secrets ...string) string {
	var kept []string
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || logLine.MatchString(l) {
			continue
		}
		kept = append(kept, l)
	}
	s := strings.Join(kept, "; ")
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	s = keyShaped.ReplaceAllString(s, "[redacted]")
	if len(s) > maxDetail {
		s = s[:maxDetail] + "…"
	}
	return s
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
