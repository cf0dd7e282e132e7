//go:build !rekeytest

package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/failpoint"
)

// TestFailpointsHaveNoSwitchInUsersBuilds: REKEY_FAILPOINT does nothing in
// a build without the rekeytest tag. A child of this test binary (built
// as the manager users run is) hits a step REKEY_FAILPOINT arms, to be
// killed and to be paused, and carries on past it both times.
func TestFailpointsHaveNoSwitchInUsersBuilds(t *testing.T) {
	if step := os.Getenv("FAILPOINT_USERS_CHILD"); step != "" {
		failpoint.Hit(step)
		failpoint.Hit(step)
		os.Stdout.WriteString("past " + step + "\n")
		return
	}
	for _, spec := range []string{"step/x", "step/x:2", "step/x:pause"} {
		// A child that stopped itself would never end: the deadline is a
		// hang guard that fails the test, never a wait it passes on.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFailpointsHaveNoSwitchInUsersBuilds$")
		cmd.Env = append(os.Environ(), "FAILPOINT_USERS_CHILD=step/x", "REKEY_FAILPOINT="+spec)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "past step/x") || strings.Contains(string(out), "failpoint step/x hit") {
			t.Errorf("REKEY_FAILPOINT=%s acted in a build without the rekeytest tag (err %v):\n%s", spec, err, out)
		}
	}
}
