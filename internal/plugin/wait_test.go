package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

type result struct {
	out string
	err error
}

// kubectlAsync runs a --wait command while the test plays the operator.
func kubectlAsync(t *testing.T, ns string, args ...string) <-chan result {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		root := NewRootCommand(Options{Out: &out, Err: &errOut})
		root.SetArgs(append([]string{"--kubeconfig", cp.Kubeconfig, "-n", ns}, args...))
		err := root.ExecuteContext(context.Background())
		done <- result{out.String(), err}
	}()
	return done
}

func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("command did not return within 30s")
	}
	return result{}
}

// requested waits until the command has written annotation key.
func requested(t *testing.T, ns, name, key string) string {
	t.Helper()
	var id string
	waitFor(t, key+" annotation", func() bool { id = get(t, ns, name).Annotations[key]; return id != "" })
	return id
}

// settle gives the command time to see the state just written.
func settle() { time.Sleep(300 * time.Millisecond) }

func TestRotateWaitFollowsToDistributed(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))
	// A refusal from before the request is history, not an answer to it.
	event(t, get(t, ns, "orders"), "Warning", reason.RotateRefused, "an old refusal", time.Now())

	ch := kubectlAsync(t, ns, "rotate", "orders", "--wait", "--timeout", "20s")
	id := requested(t, ns, "orders", engine.RotateAnnotation)
	settle()
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) { st.Phase, st.RotationID = v1.PhaseRotating, id })
	event(t, get(t, ns, "orders"), "Warning", reason.InstanceUnreachable, "instance db-1 is unreachable, so this phase is on hold", time.Now())
	settle()
	setStatus(t, ns, "orders", distributed(id))

	r := await(t, ch)
	t.Logf("rotate --wait printed:\n%s", r.out)
	if r.err != nil {
		t.Fatalf("rotate --wait: %v\n%s", r.err, r.out)
	}
	for _, want := range []string{
		"phase Idle, generation 1, consumers 0/1 rolled out",
		"phase Rotating (rotation " + id + "), generation 1, consumers 0/1 rolled out",
		"event Warning InstanceUnreachable: instance db-1 is unreachable, so this phase is on hold",
		"phase Distributed (rotation " + id + "), generation 1, consumers 0/1 rolled out",
		"rotation " + id + " distributed: old and new passwords both work until discard",
		"next step: wait for consumers to roll out (0/1)",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "an old refusal") {
		t.Errorf("an Event from before the request was reported:\n%s", r.out)
	}
}

func TestRotateWaitFailsOnRefusal(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))

	ch := kubectlAsync(t, ns, "rotate", "orders", "--wait", "--timeout", "20s")
	requested(t, ns, "orders", engine.RotateAnnotation)
	msg := "user orders@% already has a secondary password rekey did not set: reset it, then rotate again"
	event(t, get(t, ns, "orders"), "Warning", reason.DualPasswordExists, msg, time.Now())

	r := await(t, ch)
	if r.err == nil || r.err.Error() != "the operator refused (DualPasswordExists): "+msg {
		t.Fatalf("rotate --wait: error %v, want the refusal\n%s", r.err, r.out)
	}
}

func TestDiscardWaitFollowsRolloutToIdle(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(4))
	setStatus(t, ns, "orders", distributed("r-42"))

	ch := kubectlAsync(t, ns, "discard", "orders", "--wait", "--timeout", "20s")
	requested(t, ns, "orders", engine.DiscardAnnotation)
	settle()
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		now := metav1.Now()
		st.ConsumersUpdated, st.RolledOutAt = "1/1", &now
	})
	settle()
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		idle(5)(st)
		st.LastRotationID, st.RotateApplied, st.RolledOutAt = "r-42", false, nil
	})

	r := await(t, ch)
	t.Logf("discard --wait printed:\n%s", r.out)
	if r.err != nil {
		t.Fatalf("discard --wait: %v\n%s", r.err, r.out)
	}
	for _, want := range []string{
		"waiting up to 20s for rotation r-42 to complete (phase Idle, generation 5)",
		"phase Distributed (rotation r-42), generation 4, consumers 0/1 rolled out",
		"phase Distributed (rotation r-42), generation 4, consumers 1/1 rolled out",
		"phase Idle, generation 5, consumers 1/1 rolled out",
		"rotation r-42 complete: generation 5 is current, the old passwords no longer work",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
}

func TestDiscardWaitFailsOnRefusal(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))
	setStatus(t, ns, "orders", distributed("r-1"))

	ch := kubectlAsync(t, ns, "discard", "orders", "--wait", "--timeout", "20s")
	requested(t, ns, "orders", engine.DiscardAnnotation)
	msg := "no running instances (replicas: 0): the new secrets cannot be verified; scale the cluster up and discard proceeds"
	event(t, get(t, ns, "orders"), "Warning", reason.DiscardRefused, msg, time.Now())

	r := await(t, ch)
	if r.err == nil || !strings.Contains(r.err.Error(), "(DiscardRefused): "+msg) {
		t.Fatalf("discard --wait: error %v, want the refusal\n%s", r.err, r.out)
	}
}

func TestWaitTimesOut(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))
	_, _, err := kubectl(t, ns, "rotate", "orders", "--wait", "--timeout", "500ms")
	if err == nil || !strings.Contains(err.Error(), "timed out after 500ms waiting for rotation") ||
		!strings.Contains(err.Error(), "last seen: phase Idle, generation 1") {
		t.Fatalf("rotate --wait with nothing happening: %v", err)
	}
}

// TestRefusedEndsOnWhatNoWaitFixes: a wait ends on its own kind of refusal,
// and on a credential a person must fix, whatever the command; other
// Warnings (an instance that does not answer) let it go on.
func TestRefusedEndsOnWhatNoWaitFixes(t *testing.T) {
	g := goal{fatal: []reason.Reason{reason.RotateRefused}}
	warn := func(r reason.Reason) []eventsv1.Event {
		return []eventsv1.Event{{Type: "Warning", Reason: string(r), Note: "what to do"}}
	}
	for _, c := range []struct {
		r    reason.Reason
		ends bool
	}{
		{reason.RotateRefused, true},
		{reason.AuthenticationFailed, true},
		{reason.PermissionDenied, true},
		{reason.PreflightFailed, true},
		{reason.InstanceUnreachable, false},
	} {
		if got := refused(warn(c.r), g) != nil; got != c.ends {
			t.Errorf("%s: the wait ends = %v, want %v", c.r, got, c.ends)
		}
	}
}
