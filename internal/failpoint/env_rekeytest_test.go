//go:build rekeytest

package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestEnvArmsInTestBuilds: in the rekeytest build (the end-to-end tests'
// manager), REKEY_FAILPOINT alone arms a step, and the process dies of
// SIGKILL at its second hit, not at its first (run with go test -tags
// rekeytest; make test runs the users' build, where
// cmd/manager's TestFailpointsHaveNoSwitchInUsersBuilds holds the opposite).
func TestEnvArmsInTestBuilds(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Hit("step/armed")
		os.Stdout.WriteString("past the first hit\n")
		Hit("step/armed")
		os.Stdout.WriteString("past the second hit\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnvArmsInTestBuilds$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", "REKEY_FAILPOINT=step/armed:2")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed (err %v):\n%s", err, out)
	}
	if !strings.Contains(string(out), "past the first hit") || strings.Contains(string(out), "past the second hit") {
		t.Fatalf("the child did not die at the second hit:\n%s", out)
	}
}
