package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPreflightOnMinimalDebian runs the environment's preflight where a
// newcomer's machine starts: a minimal Debian root (debootstrap's minbase,
// which has apt but no make, git or debootstrap), entered with chroot. The
// environment's own sid root is that minimal Debian plus MySQL and Ceph; the
// test works on a throwaway overlay of it, so nothing it installs reaches
// the root the other tests use. Go comes from this machine, bind-mounted.
//
// What a newcomer must see, within the first minute: as a user, that root
// is needed and the apt-get command; as root with --check, the exact
// apt-get command and nothing installed; as root, the packages installed
// from the Debian mirror and the preflight passing.
func TestPreflightOnMinimalDebian(t *testing.T) {
	e, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.requireFile(filepath.Join(e.SidDir, ".rekey-ready"), "the sid chroot"); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts an overlay and chroots: run it as root, as make test does")
	}
	root := debianOverlay(t, e.SidDir)
	settleDebian(t, root)
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	bindReadOnly(t, strings.TrimSpace(string(goroot)), filepath.Join(root, "usr/local/go"))
	for _, f := range []string{"hack/env/preflight.sh", "hack/env/lib.sh", "hack/env/versions.env", "go.mod"} {
		b, err := os.ReadFile(filepath.Join(e.RepoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, "rekey", f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const withGo = "/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	const install = "apt-get install -y --no-install-recommends make git debootstrap"
	run := func(t *testing.T, user, path string, args ...string) (string, int) {
		t.Helper()
		chroot := []string{}
		if user != "" {
			chroot = append(chroot, "--userspec="+user)
		}
		chroot = append(chroot, root, "/usr/bin/env", "-i", "PATH="+path, "HOME=/tmp", "REKEY_CACHE=/tmp/rekey-cache",
			"/bin/bash", "/rekey/hack/env/preflight.sh")
		cmd := exec.Command("chroot", append(chroot, args...)...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		code := 0
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			code = exit.ExitCode()
		case err != nil:
			t.Fatalf("chroot: %v\n%s", err, out)
		}
		// The point of a preflight: a refusal comes before anything long.
		if code != 0 && took > time.Minute {
			t.Errorf("the preflight refused after %s, not within the first minute", took.Round(time.Second))
		}
		t.Logf("preflight %s as %q: exit %d in %s\n%s", strings.Join(args, " "), user, code, took.Round(time.Millisecond), out)
		return string(out), code
	}
	expect := func(t *testing.T, out string, code, wantCode int, want ...string) {
		t.Helper()
		if code != wantCode {
			t.Errorf("exit %d, want %d", code, wantCode)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output does not name %q:\n%s", w, out)
			}
		}
	}
	installed := func(cmd string) bool {
		_, err := os.Stat(filepath.Join(root, "usr/bin", cmd))
		return err == nil
	}

	t.Run("UserWithoutGo", func(t *testing.T) {
		out, code := run(t, "65534:65534", "/usr/sbin:/usr/bin:/sbin:/bin", "--check")
		expect(t, out, code, 1, "go: install Go", "not root", `sudo env PATH="$PATH" make demo`, "sudo "+install)
	})
	t.Run("User", func(t *testing.T) {
		out, code := run(t, "65534:65534", withGo)
		expect(t, out, code, 1, "not root", "sudo "+install)
		if strings.Contains(out, "go: install") {
			t.Errorf("Go is on PATH, yet the preflight asks for it:\n%s", out)
		}
	})
	t.Run("RootCheck", func(t *testing.T) {
		out, code := run(t, "", withGo, "--check")
		expect(t, out, code, 1, "preflight: missing make git debootstrap: "+install)
		if installed("make") || installed("git") {
			t.Error("--check installed packages")
		}
	})
	t.Run("RootInstalls", func(t *testing.T) {
		out, code := run(t, "", withGo)
		expect(t, out, code, 0, "preflight: installing make git debootstrap", "the host has what the environment needs")
		for _, c := range []string{"make", "git"} {
			if !installed(c) {
				t.Errorf("%s is not installed in the Debian root after the preflight", c)
			}
		}
		if !installed("../sbin/debootstrap") {
			t.Error("debootstrap is not installed in the Debian root after the preflight")
		}
		out, code = run(t, "", withGo, "--check")
		expect(t, out, code, 0, "the host has what the environment needs")
	})
}

// debianOverlay mounts a writable overlay of the Debian root lower and
// returns where; what is written there goes to a temporary directory.
func debianOverlay(t *testing.T, lower string) string {
	t.Helper()
	dir := t.TempDir()
	upper, work, merged := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "root")
	for _, d := range []string{upper, work, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := syscall.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Fatalf("mount an overlay of %s: %v", lower, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(merged, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", merged, err)
		}
	})
	return merged
}

// settleDebian makes the overlay of the sid root what a Debian machine is
// when a newcomer starts: /proc mounted, no package left half configured
// (ceph-base's postinst fails in the chroot sid-chroot.sh makes, which has
// no /proc; with /proc it configures) and apt willing to read the mirror's
// unstable Release file even when the reachable mirror is a snapshot past
// its Valid-Until date (as sid-chroot.sh does). A stable release a
// newcomer runs needs none of this.
func settleDebian(t *testing.T, root string) {
	t.Helper()
	proc := filepath.Join(root, "proc")
	if err := syscall.Mount("proc", proc, "proc", 0, ""); err != nil {
		t.Fatalf("mount /proc in the Debian root: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(proc, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", proc, err)
		}
	})
	conf := filepath.Join(root, "etc/apt/apt.conf.d/99snapshot-mirror")
	if err := os.WriteFile(conf, []byte("Acquire::Check-Valid-Until \"false\";\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("chroot", root, "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"DEBIAN_FRONTEND=noninteractive", "dpkg", "--configure", "-a").CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg --configure -a in the Debian root: %v\n%s", err, out)
	}
}

// bindReadOnly mounts src at dst (created) read-only.
func bindReadOnly(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", src, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dst, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dst, err)
		}
	})
	if err := syscall.Mount("", dst, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dst, err)
	}
}
