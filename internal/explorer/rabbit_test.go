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
// stale IDs, crashes, restores, the broker not answering, a user's
// password changed by hand and set back, deletion and policy edits, stale
// reads.
func TestRabbitMQWalks(t *testing.T) {
	walkWorld(t, Options{RabbitMQ: true, HandChanges: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true}, "the RabbitMQ world", 3)
}

// TestRabbitMQHand: someone changes the password of the set's current
// user by hand on the broker (rabbitmqctl change_password), or of the new
// generation's user mid-rotation, beside a rotation, its discard, abort
// and recover, the pod's restarts and deletion, with crashes. A pod
// refused because of the person's change is excused, but every refusal
// must name a step the state accepts, and the documented actions (setting
// the password back to the source Secret's, recover) must bring the set
// back to Idle with the pod logging in. The test fails unless a
// hand-changed user was set back (by the person, or by rekey's reset) and
// the set was Idle with the pod logging in, both for a current user and
// for a new generation's.
func TestRabbitMQHand(t *testing.T) {
	depth := envInt("REKEY_EXPLORE_RABBITMQ_HAND_DEPTH", 5)
	explorePolicies(t, Options{RabbitMQ: true, HandChanges: true, Crashes: true, Deletion: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "user: recover c1", "consumer", "someone", "user: delete the set"}},
		depth, map[string]func(*World) bool{
			"the current user put right, Idle, the pod on it": handPutRight("app-g1"),
		})
	// The new generation's user takes a rotation's steps first: explored
	// from the rotate request, without deletion, a step deeper.
	t.Run("new generation", func(t *testing.T) {
		reached := false
		o := Options{RabbitMQ: true, HandChanges: true, Crashes: true,
			Only:    []string{"user: discard (active", "user: abort (active", "user: recover c1", "consumer", "someone"},
			Observe: func(w *World) { reached = reached || handPutRight("app-g2")(w) }}
		w := replay(t, o, []Transition{{"rotate r1", annotate(engine.RotateAnnotation, "r1")}})
		exploreFrom(t, w, o, depth+1)
		if !reached {
			t.Error("never reached the new generation's user put right, Idle, the pod on it")
		}
	})
}

// handPutRight: user was changed by hand, and is now as rekey holds it,
// the set Idle (not deleted) with the pod logging in as it.
func handPutRight(user string) func(*World) bool {
	return func(w *World) bool {
		a := w.instance(broker).acct(user)
		return w.HandUser == user && !a.Hand && w.Pod.Creds[rabbitUserKey] == user && a.Accepts(w.Pod.Creds[rabbitPasswordKey]) &&
			w.Set.Status.Phase == v1.PhaseIdle && !w.deleted()
	}
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

// The new generation's user changed by hand once the discard began (the
// manager crashed right after recording it): Retire refused, naming
// "kubectl rekey recover to roll the rotation back", which the engine then
// refuses (AbortSkipped: a begun discard can only complete), so a refusal
// named a step the state refuses (no dead end at 7 steps, found by
// TestRabbitMQHand once the person's change was offered after the
// discard began). PostgreSQL's Retire said the same. Now both name the
// pending password to set back. Replayed to the hand change, then
// explored: every invariant holds, and the test fails unless the discard
// completed after the person set the password back.
func TestPathRabbitHandAfterDiscardBegan(t *testing.T) {
	done := false
	o := Options{RabbitMQ: true, HandChanges: true, Crashes: true,
		Observe: func(w *World) {
			st := w.Set.Status
			done = done || st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && w.HandUser == "app-g2" && !w.instance(broker).acct("app-g1").Exists
		}}
	w := replayLabels(t, o, []string{"user: rotate r1", "reconcile", "user: discard (active ID)", "consumer pod restarts (reads the Secret)",
		"manager crashes after discard/discard-started#1", "someone changes the new generation's user's password by hand (rabbitmqctl change_password)"})
	exploreFrom(t, w, o, 4)
	if !done {
		t.Error("never reached the discard completed after the hand change")
	}
}

// A rotation's new user changed by hand while it is Distributed, then the
// status and source Secret restored from a backup taken before it: rekey
// served the current user app-g1 again, but the pod, restarted by the
// rotation's rollout onto app-g2, kept the user the broker now refuses,
// while the set read Idle with nothing to report, so nothing named a way
// back (no wedge at 4 steps, 103 states; found by a breadth-first run of
// hand changes and restores together). Now the upkeep at rest reports a
// generation beside the current user (DualPasswordExists, naming
// recover), as the next rotation's precheck refuses it. Replayed to the
// restore, then explored: every invariant holds, and the test fails unless
// the set came back to Idle with the pod on app-g1 and app-g2 gone.
func TestPathRabbitRestoreOverHandChange(t *testing.T) {
	done := false
	o := Options{RabbitMQ: true, HandChanges: true, Crashes: true, Backups: true,
		Only: []string{"user: rotate r1", "status and source", "consumer", "user: recover c1", "someone"},
		Observe: func(w *World) {
			st := w.Set.Status
			done = done || st.Phase == v1.PhaseIdle && !st.ResetPending && w.Pod.Creds[rabbitUserKey] == "app-g1" && !w.instance(broker).acct("app-g2").Exists
		}}
	w := replayLabels(t, o, []string{"user: rotate r1", "reconcile",
		"someone changes the new generation's user's password by hand (rabbitmqctl change_password)",
		"status and source Secret restored from backup"})
	exploreFrom(t, w, o, 5)
	if !done {
		t.Error("never reached the set Idle with the pod on app-g1 and app-g2 gone")
	}
}
