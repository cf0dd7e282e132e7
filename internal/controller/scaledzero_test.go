package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestScaledToZeroSaysOnce: a cluster scaled to zero (replicas: 0) under
// a set that waits for an instance — mid-rotation, a discard asked for or
// due, a rotation requested — is said once: the Degraded condition and
// one Warning, not one per reconcile; the set then looks again only every
// few minutes (scaling up wakes it through its StatefulSet) and writes
// nothing while nothing changes. Scaled up, it goes on by itself. Before
// the fix each reconcile (every 15 s) recorded the same Warning again.
// The MySQL backend refuses every call with no instance
// (forEachInstance); no call reaches the backend here at all.
func TestScaledToZeroSaysOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy v1.DiscardPolicy
		from   func(*testing.T, *rig, *world) // leaves the set scaled to zero
		why    reason.Reason
		says   string
		then   func(*testing.T, *rig) // after scaling up
	}{
		{name: "mid-rotation, before phase 1 applied", policy: v1.DiscardManual,
			from: func(t *testing.T, g *rig, w *world) {
				g.settle()
				g.store.FailNext("Apply", errors.New("connection reset"))
				g.annotate(engine.RotateAnnotation, "r2")
				_ = g.reconcile()
				if st := g.set().Status; st.Phase != v1.PhaseRotating || st.RotateApplied {
					t.Fatalf("status %+v, want Rotating, not applied", st)
				}
				w.set(func(w *world) { w.noInstances = true })
			},
			why: reason.RotateRefused, says: "replicas: 0",
			then: func(t *testing.T, g *rig) { wantPhase(t, g, v1.PhaseDistributed, 1); wantHealthy(t, g) }},
		{name: "a discard that began", policy: v1.DiscardManual,
			from: func(t *testing.T, g *rig, w *world) {
				g.settle()
				g.annotate(engine.RotateAnnotation, "r2")
				g.settle()
				g.store.FailNext("Retire", errors.New("connection reset"))
				g.annotate(engine.DiscardAnnotation, "r2")
				_ = g.reconcile()
				if st := g.set().Status; !st.DiscardStarted || st.DiscardApplied {
					t.Fatalf("status %+v, want the discard begun, not applied", st)
				}
				w.set(func(w *world) { w.noInstances = true })
			},
			why: reason.DiscardRefused, says: "replicas: 0",
			then: func(t *testing.T, g *rig) { wantPhase(t, g, v1.PhaseIdle, 2); wantHealthy(t, g) }},
		{name: "Distributed, discard due by policy", policy: v1.DiscardAfterRollout,
			from: func(t *testing.T, g *rig, w *world) {
				g.settle()
				g.annotate(engine.RotateAnnotation, "r2")
				g.settle() // no consumer: AfterRollout holds the discard (AutoDiscardHeld)
				w.set(func(w *world) { w.noInstances = true })
			},
			why: reason.DiscardRefused, says: "replicas: 0",
			then: func(t *testing.T, g *rig) {
				wantPhase(t, g, v1.PhaseDistributed, 1)
				if c := g.condition(reason.CondDegraded); c == nil || c.Reason != string(reason.AutoDiscardHeld) {
					t.Fatalf("Degraded %+v, want %s again once scaled up", c, reason.AutoDiscardHeld)
				}
			}},
		{name: "Distributed, discard requested", policy: v1.DiscardManual,
			from: func(t *testing.T, g *rig, w *world) {
				g.settle()
				g.annotate(engine.RotateAnnotation, "r2")
				g.settle()
				w.set(func(w *world) { w.noInstances = true })
				g.annotate(engine.DiscardAnnotation, "r2")
			},
			why: reason.DiscardRefused, says: "replicas: 0",
			then: func(t *testing.T, g *rig) { wantPhase(t, g, v1.PhaseIdle, 2); wantHealthy(t, g) }},
		{name: "Idle, rotation requested", policy: v1.DiscardManual,
			from: func(t *testing.T, g *rig, w *world) {
				g.settle()
				w.set(func(w *world) { w.noInstances = true })
				g.annotate(engine.RotateAnnotation, "r2")
			},
			why: reason.RotateRefused, says: "replicas: 0",
			then: func(t *testing.T, g *rig) { wantPhase(t, g, v1.PhaseDistributed, 1); wantHealthy(t, g) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, w := newWorldRig(t, overlap, false)
			cs := g.set()
			cs.Spec.Rotation.DiscardPolicy = tc.policy
			if err := g.kc.Update(context.Background(), cs); err != nil {
				t.Fatal(err)
			}
			tc.from(t, g, w)
			from, calls := len(g.ev.got), len(g.store.Calls())
			w.set(func(w *world) { w.reached = nil })
			var rv string
			for i := range 6 {
				res, err := g.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: g.key})
				if err != nil {
					t.Fatalf("reconcile %d: %v", i, err)
				}
				if res.RequeueAfter < time.Minute {
					t.Errorf("reconcile %d comes back after %s: a set scaled to zero backs off", i, res.RequeueAfter)
				}
				if i == 1 {
					rv = g.set().ResourceVersion
				}
			}
			if g.set().ResourceVersion != rv {
				t.Errorf("the set was written again while nothing changed")
			}
			if n := g.warnings(from)[string(tc.why)]; n != 1 {
				t.Errorf("%d Warnings %s, want 1: %v", n, tc.why, g.events(from))
			}
			c := g.condition(reason.CondDegraded)
			if c == nil || c.Status != "True" || c.Reason != string(tc.why) || !strings.Contains(c.Message, tc.says) {
				t.Errorf("Degraded %+v, want True %s saying %q", c, tc.why, tc.says)
			}
			if r := w.reached; len(r) > 0 || len(g.store.Calls()) != calls {
				t.Errorf("calls while scaled to zero: %v %v", r, g.store.Calls()[calls:])
			}
			w.set(func(w *world) { w.noInstances = false })
			g.settle()
			tc.then(t, g)
			if c := g.condition(reason.CondDegraded); c == nil || c.Reason == string(tc.why) {
				t.Errorf("Degraded %+v once scaled up", c)
			}
		})
	}
}

func wantPhase(t *testing.T, g *rig, phase v1.RotationPhase, gen int64) {
	t.Helper()
	if st := g.set().Status; st.Phase != phase || st.KeyGeneration != gen {
		t.Fatalf("phase %s generation %d, want %s %d", st.Phase, st.KeyGeneration, phase, gen)
	}
}

func wantHealthy(t *testing.T, g *rig) {
	t.Helper()
	if c := g.condition(reason.CondDegraded); c == nil || c.Status != "False" {
		t.Fatalf("Degraded %+v, want False", c)
	}
}

func TestNoInstanceRefusal(t *testing.T) {
	refuse := func(why reason.Reason) engine.Decision { return engine.Decision{Action: engine.Refuse, Reason: why} }
	dropped := refuse(reason.RotateRefused)
	dropped.DropRotate = true
	for _, tc := range []struct {
		name        string
		noInstances bool
		d           engine.Decision
		want        bool
	}{
		{"rotation refused, no instance", true, refuse(reason.RotateRefused), true},
		{"discard refused, no instance", true, refuse(reason.DiscardRefused), true},
		{"with instances", false, refuse(reason.RotateRefused), false},
		{"a refusal that drops its request is said each time", true, dropped, false},
		{"another refusal", true, refuse(reason.MissingRotationPending), false},
		{"a wait", true, engine.Decision{Action: engine.Wait, Reason: reason.WaitingForRollout}, false},
		{"a rollback", true, engine.Decision{Action: engine.Rollback}, false},
	} {
		if got := noInstanceRefusal(tc.noInstances, tc.d); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	prob := &problem{reason.RotateRefused, "no running instances (replicas: 0)"}
	said := []metav1.Condition{{Type: reason.CondDegraded, Status: metav1.ConditionTrue, Reason: string(reason.RotateRefused), Message: prob.message}}
	if !saidAlready(said, prob) {
		t.Error("the condition that states it is not taken for said")
	}
	other := []metav1.Condition{{Type: reason.CondDegraded, Status: metav1.ConditionTrue, Reason: string(reason.RotateRefused), Message: "something else"}}
	if saidAlready(other, prob) || saidAlready(nil, prob) {
		t.Error("said already with another condition, or none")
	}
}
