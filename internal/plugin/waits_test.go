package plugin

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// syncBuffer is a command's output the test reads while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// running is a command the test follows as it prints.
type running struct {
	out  *syncBuffer
	done chan error
	stop context.CancelFunc
}

// kubectlLive runs the plugin in ns until it returns or stop is called.
func kubectlLive(t *testing.T, ns string, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{out: &syncBuffer{}, done: make(chan error, 1), stop: cancel}
	root := NewRootCommand(Options{Out: r.out, Err: r.out})
	root.SetArgs(append([]string{"--kubeconfig", cp.Kubeconfig, "-n", ns}, args...))
	go func() { r.done <- root.ExecuteContext(ctx) }()
	t.Cleanup(cancel)
	return r
}

// printed waits until the command printed something matching re.
func (r *running) printed(t *testing.T, re string) {
	t.Helper()
	m := regexp.MustCompile(re)
	waitFor(t, "output matching "+re, func() bool { return m.MatchString(r.out.String()) })
}

func (r *running) end(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("command did not return within 30s:\n%s", r.out)
	}
	return nil
}

// TestStatusSaysTheResetDeadline: after an abort, status's NEXT STEP says
// when the reset comes and why, from status.waiting (the manager's own
// gracePeriod), and -v gives the time of day.
func TestStatusSaysTheResetDeadline(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(3))
	until := metav1.NewTime(time.Now().Add(4*time.Minute + 30*time.Second).Truncate(time.Second))
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.ResetPending, st.LastRolledBackID, st.ConsumersUpdated = true, "r-4", "1/1"
		st.Waiting = &v1.WaitStatus{For: v1.WaitResetGracePeriod, Until: &until}
	})
	if w := get(t, ns, "orders").Status.Waiting; w == nil || !w.Until.Equal(&until) {
		t.Fatalf("the API server kept status.waiting as %+v: the CRD lacks the field", w)
	}
	out, _, err := kubectl(t, ns, "status", "orders")
	if err != nil {
		t.Fatal(err)
	}
	r := rows(out)
	if len(r) != 2 || !regexp.MustCompile(`^wait: reset in 4m[0-9]+s: gracePeriod after the rollback's rollout$`).MatchString(r[1][len(r[1])-1]) {
		t.Fatalf("status after an abort:\n%s", out)
	}
	out, _, err = kubectl(t, ns, "status", "orders", "-v")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  waiting: until " + until.UTC().Format("2006-01-02 15:04:05 MST") + " (in 4m",
		"after the rollback's rollout, for consumers rekey cannot watch; then MySQL is reset to the current passwords\n",
		"  accepted: generation 3, and whatever the rolled-back rotation applied until the reset\n",
		"  instances and users: not checked yet (kubectl rekey check orders",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status -v lacks %q:\n%s", want, out)
		}
	}
}

// TestAbortWaitSaysTheDeadline: abort --wait names the reset's wait with
// its deadline, and says up front that it comes after --timeout.
func TestAbortWaitSaysTheDeadline(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(3))
	setStatus(t, ns, "orders", distributed("r-4"))
	run := kubectlLive(t, ns, "abort", "orders", "--wait", "--timeout", "60s")
	requested(t, ns, "orders", engine.AbortAnnotation)
	run.printed(t, `phase Distributed \(rotation r-4\)`)
	until := metav1.NewTime(time.Now().Add(4 * time.Minute).Truncate(time.Second))
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.Phase, st.RotationID, st.RotateApplied, st.ResetPending, st.LastRolledBackID = v1.PhaseIdle, "", false, true, "r-4"
		st.Waiting = &v1.WaitStatus{For: v1.WaitResetGracePeriod, Until: &until}
	})
	at := until.UTC().Format("15:04:05 MST")
	run.printed(t, `phase Idle, generation 3, resetPending, consumers 0/1 rolled out; reset in [34]m[0-9]+s: gracePeriod after the rollback's rollout \(at `+at+`\)`)
	run.printed(t, `note: the operator waits until `+at+` \(ResetGracePeriod\), after --timeout 1m0s`)
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) { st.ResetPending, st.Waiting = false, nil })
	if err := run.end(t); err != nil {
		t.Fatalf("abort --wait: %v\n%s", err, run.out)
	}
	t.Logf("abort --wait printed:\n%s", run.out)

	// Begun while the reset waits: the deadline is past --timeout.
	setStatus(t, ns, "orders", distributed("r-5"))
	run = kubectlLive(t, ns, "abort", "orders", "--wait", "--timeout", "60s")
	waitFor(t, "the abort request for r-5", func() bool { return get(t, ns, "orders").Annotations[engine.AbortAnnotation] == "r-5" })
	run.printed(t, `phase Distributed \(rotation r-5\)`)
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.Phase, st.RotationID, st.RotateApplied, st.ResetPending, st.LastRolledBackID = v1.PhaseIdle, "", false, true, "r-5"
		st.Waiting = &v1.WaitStatus{For: v1.WaitResetGracePeriod, Until: &until}
	})
	run.printed(t, `reset in [34]m[0-9]+s`)
	run.stop()
	err := run.end(t)
	if err == nil || !strings.Contains(err.Error(), "reset in ") || !strings.Contains(err.Error(), "(at "+at+")") {
		t.Fatalf("stopped abort --wait: error %v, want the last seen wait with its deadline\n%s", err, run.out)
	}
}

// TestWaitGivesUpOnDegraded: a set that turns Degraded for a reason no
// waiting fixes ends --wait at once with that reason, even with no Event;
// one that waiting fixes (an unreachable instance) does not, nor does one
// the set showed before the request.
func TestWaitGivesUpOnDegraded(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))
	degraded := func(r reason.Reason, msg string) func(*v1.CredentialSetStatus) {
		return func(st *v1.CredentialSetStatus) {
			st.Conditions = []metav1.Condition{{Type: reason.CondDegraded, Status: metav1.ConditionTrue, Reason: string(r), Message: msg, LastTransitionTime: metav1.Now()}}
		}
	}
	setStatus(t, ns, "orders", degraded(reason.AuthenticationFailed, "an old failure, fixed since"))
	start := time.Now()
	run := kubectlLive(t, ns, "rotate", "orders", "--wait", "--timeout", "60s")
	requested(t, ns, "orders", engine.RotateAnnotation)
	run.printed(t, `phase Idle, generation 1`)
	setStatus(t, ns, "orders", degraded(reason.InstanceUnreachable, "instance db-1 is unreachable, so this phase is on hold"))
	run.printed(t, `Degraded: instance db-1 is unreachable`)
	msg := "1 check failed: db-0.example.internal:3306 privileges: the admin lacks CREATE USER; fix: GRANT CREATE USER ON *.* TO 'ops-admin'@'%'; kubectl rekey check orders lists them"
	setStatus(t, ns, "orders", degraded(reason.PreflightFailed, msg))
	err := run.end(t)
	if err == nil || err.Error() != "the operator refused (PreflightFailed): "+msg {
		t.Fatalf("rotate --wait on a refused set: %v\n%s", err, run.out)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("gave up after %s, not at once", took)
	}
}
