package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestBackedOffHoldsWakeUps: as the manager's queue runs it, a failed
// attempt is retried after the set's backoff and a wake-up before then
// touches neither the backend nor the set; a person's change (here an
// annotation) is tried at once. Until provisioned the set is Pending.
func TestBackedOffHoldsWakeUps(t *testing.T) {
	g := newRig(t, overlap, false)
	q := backedOff{g.r}
	req := ctrl.Request{NamespacedName: g.key}
	g.store.FailNext("Provision", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"))

	res, err := q.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != time.Second {
		t.Fatalf("first failure: %v, requeue %s; want no error and the 1 s backoff", err, res.RequeueAfter)
	}
	failed := g.set()
	if failed.Status.Phase != v1.PhasePending {
		t.Fatalf("phase %q before anything was provisioned, want Pending", failed.Status.Phase)
	}
	calls, events := len(g.store.Calls()), len(g.ev.got)

	for range 5 { // woken early: by a consumer, a Secret, a release
		res, err = q.Reconcile(context.Background(), req)
		if err != nil || res.RequeueAfter != time.Second {
			t.Fatalf("held wake-up: %v, requeue %s", err, res.RequeueAfter)
		}
	}
	if got := g.store.Calls()[calls:]; len(got) != 0 {
		t.Errorf("the backend was called while the backoff held: %v", got)
	}
	if now := g.set(); now.ResourceVersion != failed.ResourceVersion {
		t.Errorf("the set was written while the backoff held")
	}
	if len(g.ev.got) != events {
		t.Errorf("Events while the backoff held: %v", g.ev.got[events:])
	}

	g.annotate("example.com/touched", "1")
	if _, err := q.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(g.store.Calls()[calls:], "Provision") {
		t.Fatalf("a person's change was held too: calls %v", g.store.Calls()[calls:])
	}
	if st := g.set().Status; st.Phase != v1.PhaseIdle || st.KeyGeneration != 1 {
		t.Fatalf("after the retry: phase %s generation %d, want Idle 1", st.Phase, st.KeyGeneration)
	}
	if left := g.r.retries.left(g.key, g.r.now()); left != 0 {
		t.Errorf("held %s after a success", left)
	}
}
