package controller

import (
	"errors"
	"slices"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestUnidentifiedClusterHoldsOnlyRetirement: while a Distributed set's
// cluster cannot be identified (a RabbitMQ cluster name unreadable), the
// old credentials are not retired — no discard, requested or begun — but
// abort and recover still run, and the hold is reported. Before the fix
// the hold ended the reconcile before the decision: abort and recover
// never ran. The RabbitMQ backend's side, ClusterID failing, is proved by
// internal/backend/rabbitmq's tests: on a real rabbitmq-server when the
// admin cannot read the overview (TestOnRealBroker, "wrong admin
// password"), and on an endpoint nobody answers (TestUnreachable); here
// the fault is injected.
func TestUnidentifiedClusterHoldsOnlyRetirement(t *testing.T) {
	unreadable := errors.New("GET /api/overview: 503 Service Unavailable")
	distributed := func(t *testing.T) (*rig, *world) {
		g, w := newWorldRig(t, overlap, false)
		g.settle()
		g.annotate(engine.RotateAnnotation, "r2")
		g.settle()
		if st := g.set().Status; st.Phase != v1.PhaseDistributed {
			t.Fatalf("phase %s, want Distributed", st.Phase)
		}
		w.set(func(w *world) { w.clusterErr = unreadable })
		return g, w
	}
	held := func(t *testing.T, g *rig, from int) {
		t.Helper()
		if n := g.warnings(from)[string(reason.ClusterUnidentified)]; n == 0 {
			t.Errorf("no Warning %s: %v", reason.ClusterUnidentified, g.events(from))
		}
		if c := g.condition("Degraded"); c == nil || c.Reason != string(reason.ClusterUnidentified) {
			t.Errorf("Degraded condition %+v, want reason %s", c, reason.ClusterUnidentified)
		}
	}

	t.Run("a discard request retires nothing", func(t *testing.T) {
		g, _ := distributed(t)
		from := len(g.ev.got)
		g.annotate(engine.DiscardAnnotation, "r2")
		g.settle()
		st := g.set().Status
		if st.Phase != v1.PhaseDistributed || st.DiscardStarted || st.DiscardApplied {
			t.Fatalf("status %+v: the discard went ahead on an unidentified cluster", st)
		}
		if !g.store.Accepts(g1) || slices.Contains(g.store.Calls(), "Retire") {
			t.Fatalf("the old secret was retired: calls %v", g.store.Calls())
		}
		held(t, g, from)
	})

	t.Run("abort rolls back", func(t *testing.T) {
		g, _ := distributed(t)
		from := len(g.ev.got)
		g.annotate(engine.AbortAnnotation, "r2")
		g.settle()
		st := g.set().Status
		if st.Phase != v1.PhaseIdle || st.KeyGeneration != 1 {
			t.Fatalf("abort did not run: phase %s, generation %d, events %v", st.Phase, st.KeyGeneration, g.events(from))
		}
		if g.served() != g1 || !g.store.Accepts(g1) || g.store.Accepts(g2) {
			t.Fatalf("served %s; accepts g1 %v, g2 %v: want g1 only", g.served(), g.store.Accepts(g1), g.store.Accepts(g2))
		}
		if !slices.Contains(g.events(from), "Normal RotationAborted") {
			t.Errorf("no RotationAborted Event: %v", g.events(from))
		}
	})

	t.Run("recover resets", func(t *testing.T) {
		g, _ := distributed(t)
		from := len(g.ev.got)
		g.annotate(engine.RecoverAnnotation, "rec1")
		g.settle()
		st := g.set().Status
		if st.Phase != v1.PhaseIdle || st.KeyGeneration != 1 || st.ResetPending {
			t.Fatalf("recover did not run: phase %s, generation %d, resetPending %v, events %v", st.Phase, st.KeyGeneration, st.ResetPending, g.events(from))
		}
		if g.served() != g1 || g.store.Accepts(g2) {
			t.Fatalf("served %s, g2 accepted %v", g.served(), g.store.Accepts(g2))
		}
	})

	t.Run("a discard that began goes on once the cluster is identified", func(t *testing.T) {
		g, w := distributed(t)
		w.set(func(w *world) { w.clusterErr = nil })
		// The discard records that it began, then Retire fails once.
		g.store.FailNext("Retire", errors.New("connection reset"))
		g.annotate(engine.DiscardAnnotation, "r2")
		_ = g.reconcile()
		if st := g.set().Status; !st.DiscardStarted || st.DiscardApplied {
			t.Fatalf("status %+v, want the discard begun and not applied", st)
		}
		w.set(func(w *world) { w.clusterErr = unreadable })
		from := len(g.ev.got)
		calls := len(g.store.Calls())
		for range 3 {
			if err := g.reconcile(); err != nil {
				t.Fatal(err)
			}
		}
		if slices.Contains(g.store.Calls()[calls:], "Retire") {
			t.Fatalf("Retire called while the cluster is unidentified: %v", g.store.Calls()[calls:])
		}
		held(t, g, from)
		w.set(func(w *world) { w.clusterErr = nil })
		g.settle()
		if st := g.set().Status; st.Phase != v1.PhaseIdle || st.KeyGeneration != 2 || g.store.Accepts(g1) {
			t.Fatalf("the discard did not finish: %+v", st)
		}
	})
}

func TestRetirementHeld(t *testing.T) {
	hold := &problem{reason.ClusterUnidentified, "the backend cluster cannot be identified"}
	distributed := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotateApplied: true}
	begun := distributed
	begun.DiscardStarted = true
	applied := begun
	applied.DiscardApplied = true
	idle := v1.CredentialSetStatus{Phase: v1.PhaseIdle}
	for _, tc := range []struct {
		name          string
		hold          *problem
		d             engine.Action
		st            v1.CredentialSetStatus
		held, retires bool
	}{
		{"no hold", nil, engine.Discard, distributed, false, false},
		{"a discard is stopped", hold, engine.Discard, distributed, true, true},
		{"a discard that began is stopped", hold, engine.Discard, begun, true, true},
		{"a discard applied confirms: nothing left to retire", hold, engine.Discard, applied, false, false},
		{"a rollback goes on", hold, engine.Rollback, distributed, true, false},
		{"a wait goes on, the hold reported", hold, engine.Wait, distributed, true, false},
		{"rolled back: nothing to retire, nothing reported", hold, engine.None, idle, false, false},
	} {
		got, retires := retirementHeld(tc.hold, engine.Decision{Action: tc.d}, tc.st)
		if (got != nil) != tc.held || retires != tc.retires {
			t.Errorf("%s: held %v retires %v, want %v %v", tc.name, got != nil, retires, tc.held, tc.retires)
		}
	}
}
