package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPreflight: the environment scripts' first step names, within
// seconds, what a fresh machine lacks and the command that fixes it,
// instead of failing half an hour into the Kubernetes build. It runs the
// real script on a PATH that holds this machine's commands but the ones
// under test, with an empty cache (no chroot yet).
func TestPreflight(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "hack/env/preflight.sh")
	// The commands the script itself runs, taken from this machine.
	base := []string{"bash", "dirname", "id", "sed", "go", "apt-get", "make", "git", "dpkg-deb", "chroot", "debootstrap"}
	run := func(t *testing.T, without ...string) (string, int) {
		t.Helper()
		bin := t.TempDir()
		for _, c := range base {
			if slices.Contains(without, c) {
				continue
			}
			p, err := exec.LookPath(c)
			if err != nil {
				t.Fatalf("%s is not on this machine: the preflight should have installed it (make env runs it first)", c)
			}
			if err := os.Symlink(p, filepath.Join(bin, c)); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(filepath.Join(bin, "bash"), script, "--check")
		cmd.Env = []string{"PATH=" + bin, "HOME=" + t.TempDir(), "REKEY_CACHE=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &exit):
			return string(out), exit.ExitCode()
		}
		t.Fatalf("preflight: %v\n%s", err, out)
		return "", 0
	}
	t.Run("NothingMissing", func(t *testing.T) {
		out, code := run(t)
		if code != 0 || !strings.Contains(out, "the host has what the environment needs") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	for _, tc := range []struct {
		without []string
		want    string
	}{
		{[]string{"debootstrap"}, "apt-get install -y --no-install-recommends debootstrap"},
		{[]string{"debootstrap", "make"}, "apt-get install -y --no-install-recommends make debootstrap"},
		{[]string{"git"}, "apt-get install -y --no-install-recommends git"},
		{[]string{"go"}, "go: install Go 1.26.0 or newer"},
		{[]string{"apt-get"}, "the environment needs a Debian machine"},
	} {
		t.Run("Without-"+strings.Join(tc.without, "-"), func(t *testing.T) {
			out, code := run(t, tc.without...)
			if code != 1 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want 1 naming %q:\n%s", code, tc.want, out)
			}
		})
	}
}
