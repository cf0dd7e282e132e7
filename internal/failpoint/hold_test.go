package failpoint

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestHoldKeepsTheElectorUntilReconcilesEnd runs this test binary as a
// child armed with a ":hold" failpoint, with an elector that asks
// LeaderRequest in a loop and a reconcile that hits the failpoint. The
// child stops itself only once the elector waits at the gate; after
// SIGCONT the elector gets no request through while the reconcile goes
// on (it looks for 200 ms), and gets one through once it ended.
func TestHoldKeepsTheElectorUntilReconcilesEnd(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		holdChild()
		return
	}
	var out strings.Builder
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldKeepsTheElectorUntilReconcilesEnd$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for !stopped(t, pid) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{"holding the leader elector", "pausing the process", "resumed", "reconcile ended", "elector went on"} {
		if !strings.Contains(got, want) {
			t.Fatalf("the child did not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "elector got through while held") {
		t.Fatalf("the elector went on before the reconcile under way at the pause ended:\n%s", got)
	}
}

func holdChild() {
	Arm("step/held:2:hold")
	var (
		mu         sync.Mutex
		reconciled bool // the reconcile under way at the pause ended
		woken      bool
		through    = make(chan struct{}, 1)
	)
	go func() { // the elector: a request every retry period
		for {
			LeaderRequest()
			mu.Lock()
			if woken && !reconciled {
				os.Stdout.WriteString("elector got through while held\n")
			}
			if reconciled {
				select {
				case through <- struct{}{}:
				default:
				}
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	ended := Reconciling()
	Hit("step/held") // the first hit is not the armed one
	Hit("step/held")
	mu.Lock()
	woken = true
	mu.Unlock()
	time.Sleep(200 * time.Millisecond) // the elector's chance to get through
	mu.Lock()
	reconciled = true
	mu.Unlock()
	os.Stdout.WriteString("reconcile ended\n")
	ended()
	<-through
	os.Stdout.WriteString("elector went on\n")
}

// TestReconcilingCostsNothingUnlessHeld: without a ":hold" failpoint no
// reconcile is tracked.
func TestReconcilingCostsNothingUnlessHeld(t *testing.T) {
	for _, spec := range []string{"", "step/x", "step/x:pause", "step/x:2:pause"} {
		Arm(spec)
		done := Reconciling()
		mu.Lock()
		n := len(active)
		mu.Unlock()
		done()
		if n != 0 {
			t.Fatalf("%q: %d reconciles tracked", spec, n)
		}
	}
	Arm("step/x:3:hold")
	mu.Lock()
	got := armed + " " + itoa(target)
	h := held && pause
	mu.Unlock()
	Arm("")
	if got != "step/x 3" || !h {
		t.Fatalf("step/x:3:hold armed %q (held %v)", got, h)
	}
}
