package testenv

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSetupStopsBuildsWhenChrootFails: hack/env/setup.sh prepares the sid
// chroot beside the Kubernetes build; when the chroot fails (a mirror that
// moved past the pinned MySQL, no network), the build must stop then, not
// run its 15 minutes first and fail at the end with the cause far above.
// The real setup.sh runs with the other scripts replaced by stand-ins: a
// failing chroot cannot be produced on demand, and the real build is what
// must not run. The build's stand-in runs a child that only a stop ends.
func TestSetupStopsBuildsWhenChrootFails(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "hack/env")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"setup.sh", "lib.sh", "versions.env"} {
		b, err := os.ReadFile(filepath.Join(root, "hack/env", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	marks := filepath.Join(tmp, "marks")
	stand := map[string]string{
		// The build: records its child, then waits for it.
		"control-plane.sh": `sleep 3600 & echo $! > "$MARKS/build-child"; wait`,
		"tools.sh":         `touch "$MARKS/tools-ran"`,
		"moco.sh":          `touch "$MARKS/moco-ran"`,
		// The chroot fails once the build runs.
		"sid-chroot.sh": `until [[ -s $MARKS/build-child ]]; do sleep 0.05; done; echo "[env] mysqld 9.8.0 is not the pinned 9.7.*" >&2; exit 1`,
		"oslo.sh":       `touch "$MARKS/oslo-ran"`,
		"promtool.sh":   `touch "$MARKS/promtool-ran"`,
		"preflight.sh":  `:`, "rabbitmq.sh": `:`, "postgres.sh": `:`, "runc.sh": `:`,
	}
	for name, body := range stand {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/usr/bin/env bash\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	// A hang guard only: with the stop broken, setup.sh waits an hour.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(dir, "setup.sh"))
	cmd.Env = append(os.Environ(), "MARKS="+marks, "REKEY_CACHE="+filepath.Join(tmp, "cache"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	t.Logf("setup.sh:\n%s", out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("setup.sh: %v, want exit 1 (ctx: %v)", err, ctx.Err())
	}
	for _, w := range []string{"mysqld 9.8.0 is not the pinned", "stopped the builds: sid-chroot.sh failed", "environment not ready: sid-chroot.sh failed"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("setup.sh's output does not say %q", w)
		}
	}
	b, err := os.ReadFile(filepath.Join(marks, "build-child"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the build's child %d still runs after setup.sh failed", pid)
	}
	for _, m := range []string{"tools-ran", "moco-ran", "promtool-ran"} {
		if _, err := os.Stat(filepath.Join(marks, m)); err == nil {
			t.Errorf("%s: a step after the failed chroot ran", m)
		}
	}
	if _, err := os.Stat(filepath.Join(marks, "oslo-ran")); err != nil {
		t.Errorf("oslo.sh, beside the chroot, did not run: %v", err)
	}
}

// alive says whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}
