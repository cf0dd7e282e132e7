package cli

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Passwords the tests put in Secrets. No run but show may print one.
var (
	secretsMu sync.Mutex
	secrets   = map[string]bool{}
	scanned   atomic.Int32
)

func secretCount() int {
	secretsMu.Lock()
	defer secretsMu.Unlock()
	return len(secrets)
}

// password returns a fresh random password and remembers it.
func password() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	pw := "pw" + hex.EncodeToString(b)
	secretsMu.Lock()
	secrets[pw] = true
	secretsMu.Unlock()
	return pw
}

// valueFlags are the global flags the tests pass that take a separate value.
var valueFlags = map[string]bool{
	"--kubeconfig": true, "--context": true, "-n": true, "--namespace": true, "--as": true, "--as-group": true,
	"--token": true, "--server": true, "-s": true, "--certificate-authority": true, "--request-timeout": true,
	"--cluster": true, "--user": true,
}

// subcommand is the first argument that is neither a flag nor a flag's
// value (valueFlags are the global flags taking a value).
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case valueFlags[a]:
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

// checkNoLeak fails the test if a run other than show printed any known
// password, or show printed one on stderr.
func checkNoLeak(t *testing.T, r result) {
	t.Helper()
	scanned.Add(1)
	secretsMu.Lock()
	defer secretsMu.Unlock()
	for pw := range secrets {
		if strings.Contains(r.stderr, pw) {
			t.Errorf("a password appears on stderr:\n%s", r)
		}
		if subcommand(r.args) != "show" && strings.Contains(r.stdout, pw) {
			t.Errorf("%q printed a password; only show may:\n%s", subcommand(r.args), r)
		}
	}
}
