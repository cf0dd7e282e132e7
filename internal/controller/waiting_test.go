package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// TestStatusWaitingAfterAbort: status.waiting names each wait of a
// rollback with the deadline the reconciler requeues for — the consumers'
// rollout, then the manager's gracePeriod after it — and is cleared once
// the reset ran; the WaitingForRollout Event names the rotation rolled
// back.
func TestStatusWaitingAfterAbort(t *testing.T) {
	g := newRig(t, overlap, true)
	g.r.DefaultGracePeriod = 5 * time.Minute
	fromDistributed(g)
	g.wantWaiting(v1.WaitRollout, time.Time{})

	from := len(g.ev.got)
	g.annotate(engine.AbortAnnotation, "r2")
	g.settle()
	g.wantWaiting(v1.WaitRollback, time.Time{})
	if evs := strings.Join(g.ev.got[from:], "\n"); !strings.Contains(evs, "WaitingForRollout: rollback of rotation r2: ") {
		t.Errorf("the WaitingForRollout Event does not name rotation r2:\n%s", evs)
	}

	g.rollOut()
	for i := 0; i < 3 && g.set().Status.Waiting != nil && g.set().Status.Waiting.For == v1.WaitRollback; i++ {
		if err := g.reconcile(); err != nil {
			t.Fatal(err)
		}
	}
	rolled := g.set().Status.RolledOutAt
	if rolled == nil {
		t.Fatal("the rollback's rollout was not recorded")
	}
	g.wantWaiting(v1.WaitResetGracePeriod, rolled.Add(5*time.Minute))
	res, err := g.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: g.key})
	if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > 5*time.Minute {
		t.Fatalf("while the reset waits: %+v, %v", res, err)
	}
	if !g.set().Status.ResetPending {
		t.Fatal("the reset ran before gracePeriod passed")
	}

	later := rolled.Add(5*time.Minute + time.Second)
	g.r.Now = func() time.Time { return later }
	g.settle()
	if st := g.set().Status; st.ResetPending || st.Waiting != nil {
		t.Fatalf("after gracePeriod: resetPending %v, waiting %+v", st.ResetPending, st.Waiting)
	}
}

func (g *rig) wantWaiting(f v1.WaitFor, until time.Time) {
	g.t.Helper()
	w := g.set().Status.Waiting
	switch {
	case w == nil:
		g.t.Fatalf("status.waiting is empty, want %s", f)
	case w.For != f:
		g.t.Fatalf("status.waiting.for = %s, want %s", w.For, f)
	case until.IsZero() && w.Until != nil:
		g.t.Fatalf("status.waiting.until = %s, want none", w.Until)
	case !until.IsZero() && (w.Until == nil || !w.Until.Time.Equal(until)):
		g.t.Fatalf("status.waiting.until = %v, want %s", w.Until, until)
	}
}

// rollOut finishes Deployment app/web's rollout.
func (g *rig) rollOut() {
	g.t.Helper()
	d := &appsv1.Deployment{}
	if err := g.kc.Get(context.Background(), client.ObjectKey{Namespace: "app", Name: "web"}, d); err != nil {
		g.t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := g.kc.Status().Update(context.Background(), d); err != nil {
		g.t.Fatal(err)
	}
}
