package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// The RabbitMQ model (rabbitmodel.go): a rotation, its discard and its
// rollback, recover, a restore from backup, the broker not answering,
// deletion with each policy, at every step with crashes. Every invariant
// holds; the test fails unless a rotation completed (the first
// generation's user deleted), one was rolled back (the second's deleted),
// and the set was wound down.
func TestRabbitMQ(t *testing.T) {
	explorePolicies(t, Options{RabbitMQ: true, Crashes: true, Backups: true, Deletion: true, Only: backendOnly("broker")},
		envInt("REKEY_EXPLORE_RABBITMQ_DEPTH", 6), map[string]func(*World) bool{
			"completed": func(w *World) bool {
				st := w.Set.Status
				return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && !w.instance(broker).acct("app-g1").Exists
			},
			"rolled back": func(w *World) bool {
				st := w.Set.Status
				return st.LastRolledBackID == "r1" && !st.ResetPending && !w.instance(broker).acct("app-g2").Exists
			},
			"wound down": woundDown,
		})
}

// TestRabbitMQWalks takes seeded random walks of the RabbitMQ world among
// every transition it has: the user's requests with fresh, repeated and
// stale IDs, crashes, restores, the broker not answering, deletion and
// policy edits, stale reads.
func TestRabbitMQWalks(t *testing.T) {
	walkWorld(t, Options{RabbitMQ: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true}, "the RabbitMQ world", 3)
}

// A deleted set held for a rotation its restored status does not account
// for (DualPasswordExists), recovered, and its recovery's reset done but
// not yet recorded (a crash), read by a manager whose cache lags (a new
// leader's, from before the recovery was recorded): its wind-down must
// not run on that old view. It used to: the precheck found nothing to
// hold any more, the backend was wound down and the source Secret emptied
// while the set still owed the end of its recovery, which then waited
// forever for current secrets (no wedge; found by the RabbitMQ world's
// random walks, seed 3, 31 steps). Replayed to the recover request, then
// explored with crashes and stale reads, on MySQL as on RabbitMQ
// (deletionPolicy Discard, which waits for no consumer). The test fails
// unless a stale read of the set owing the end of its recovery was
// explored.
func TestPathStaleWindDown(t *testing.T) {
	for _, rabbit := range []bool{true, false} {
		name := "MySQL"
		if rabbit {
			name = "RabbitMQ"
		}
		t.Run(name, func(t *testing.T) {
			reached := false
			o := Options{Instances: []string{"i0"}, RabbitMQ: rabbit, Crashes: true, StaleReads: true, Backups: true, Deletion: true,
				Only: []string{"consumer pod"},
				Observe: func(w *World) {
					reached = reached || w.deleted() && w.Set.Status.ResetPending && w.Older != nil && !w.Older.Status.ResetPending
				}}
			w := replay(t, o, []Transition{{"rotate r1", annotate(engine.RotateAnnotation, "r1")}, {"reconcile", reconcileStep},
				{"restore", restoreBackup}, {"delete the set", deleteSet}, {"delete the consumer", deleteConsumer},
				{"recover c1", annotate(engine.RecoverAnnotation, "c1")}})
			exploreFrom(t, w, o, 4)
			if !reached {
				t.Error("never reached a deleted set owing the end of its recovery with an older view of it")
			}
		})
	}
}
