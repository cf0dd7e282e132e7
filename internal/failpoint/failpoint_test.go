package failpoint

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPauseStopsAndResumes runs this test binary as a child armed with a
// pause failpoint: the child stops itself at the step (the parent sees it
// stopped), and continues past the step only after SIGCONT.
func TestPauseStopsAndResumes(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Arm(os.Getenv("FAILPOINT_SPEC"))
		Hit("step/other")
		Hit("step/paused")
		os.Stdout.WriteString("after the step\n")
		return
	}
	var out strings.Builder
	cmd := exec.Command(os.Args[0], "-test.run=^TestPauseStopsAndResumes$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", "FAILPOINT_SPEC=step/paused:pause")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for !stopped(t, pid) {
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(out.String(), "after the step") {
		t.Fatal("the child ran past the paused step")
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "after the step") || !strings.Contains(out.String(), "resumed") {
		t.Fatalf("the child did not resume past the step:\n%s", out.String())
	}
}

// stopped: /proc says the process is stopped (state T).
func stopped(t *testing.T, pid int) bool {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndex(string(b), ")")+1:])
	return len(f) > 0 && f[0] == "T"
}

func itoa(i int) string { return strconv.Itoa(i) }
