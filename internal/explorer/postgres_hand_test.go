package explorer

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// pgHandOnly are the transitions of TestPostgresHand: the user's
// rotation, discard, abort and recover, the consumer, the person's
// change and its setting back, and deletion.
func pgHandOnly() []string {
	return []string{"user: rotate r1", "user: discard (active", "user: abort (active", "user: recover c1", "consumer", "someone", "status and source", "user: delete the set"}
}

// TestPostgresHand: someone changes the password of the set's current
// login role by hand on the primary (ALTER ROLE ... PASSWORD), or of the
// new generation's mid-rotation (pghand.go), beside a rotation, its
// discard, abort and recover, the pod's restarts and deletion, with
// crashes. A pod refused because of the person's change is excused, but
// every refusal must name a step the state accepts, and the documented
// actions (the password set back to the source Secret's, recover) must
// bring the set back to Idle with the pod logging in. The test fails
// unless the upkeep at rest reported the hand-changed current login
// (KeyMismatch, naming both ways back), and a hand-changed role was put
// right (by the person, or by rekey's reset) with the set Idle and the
// pod on it, for a current login and for a new generation's.
// REKEY_EXPLORE_POSTGRES_HAND_DEPTH sets the depth.
func TestPostgresHand(t *testing.T) {
	depth := envInt("REKEY_EXPLORE_POSTGRES_HAND_DEPTH", 5)
	explorePolicies(t, Options{Postgres: true, HandChanges: true, Crashes: true, Backups: true, Deletion: true, Only: pgHandOnly()},
		depth, map[string]func(*World) bool{
			"the upkeep at rest reported the hand-changed login": pgUpkeepReported,
			"the current login put right, Idle, the pod on it":   pgHandPutRight("app_g1"),
		})
	// The new generation's role takes a rotation's steps first: explored
	// from the rotate request, without deletion, a step deeper.
	t.Run("new generation", func(t *testing.T) {
		var reached, discarded bool
		o := Options{Postgres: true, HandChanges: true, Crashes: true, Backups: true, Only: pgHandOnly()[1:7],
			Observe: func(w *World) {
				reached = reached || pgHandPutRight("app_g2")(w)
				discarded = discarded || pgHandPutRight("app_g2")(w) && w.Set.Status.LastRotationID == "r1" && !w.instance(pgPrimary).acct("app_g1").Exists
			}}
		w := replay(t, o, []Transition{{"rotate r1", annotate(engine.RotateAnnotation, "r1")}})
		exploreFrom(t, w, o, depth+1)
		if !reached || !discarded {
			t.Errorf("never reached the new generation's role put right, Idle, the pod on it (%v), after a completed discard (%v)", reached, discarded)
		}
	})
}

// pgUpkeepReported: the set at rest, its current login changed by hand,
// and the upkeep's KeyMismatch naming the password set back and recover.
func pgUpkeepReported(w *World) bool {
	if w.Set.Status.Phase != v1.PhaseIdle || w.HandUser != string(w.Source.Data[pgUserKey]) {
		return false
	}
	for _, m := range w.Warnings {
		if strings.HasPrefix(m, string(reason.KeyMismatch)+":") && strings.Contains(m, "set it back to the source Secret's password") && mentions([]string{m}, recoverCmd) {
			return true
		}
	}
	return false
}

// pgHandPutRight: role was changed by hand, and is now as rekey holds it,
// the set Idle (not deleted) with the pod logging in as it on both
// instances.
func pgHandPutRight(role string) func(*World) bool {
	return func(w *World) bool {
		p, r := w.instance(pgPrimary), w.instance(pgReplica)
		pw := w.Pod.Creds[pgPasswordKey]
		return w.HandUser == role && !p.acct(role).Hand && w.Pod.Creds[pgUserKey] == role && p.acct(role).Accepts(pw) && r.acct(role).Accepts(pw) &&
			w.Set.Status.Phase == v1.PhaseIdle && !w.deleted()
	}
}
