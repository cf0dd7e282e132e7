package explorer

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// The Ceph model (cephmodel.go), Overlapping: a rotation, its discard and
// its rollback, recover, a restore from backup, the monitor not answering,
// deletion with each policy, at every step with crashes. Every invariant
// holds; the test fails unless a rotation completed (the first
// generation's entity removed), one was rolled back (the second's
// removed), and the set was wound down.
func TestCeph(t *testing.T) {
	explorePolicies(t, Options{Ceph: true, Crashes: true, Backups: true, Deletion: true, Only: backendOnly("mon")},
		envInt("REKEY_EXPLORE_CEPH_DEPTH", 5), map[string]func(*World) bool{
			"completed": func(w *World) bool {
				st := w.Set.Status
				return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && !w.instance(cephMon).acct(cephBase+".1").Exists
			},
			"rolled back": func(w *World) bool {
				st := w.Set.Status
				return st.LastRolledBackID == "r1" && !st.ResetPending && !w.instance(cephMon).acct(cephBase+".2").Exists
			},
			"wound down": woundDown,
		})
}

// TestCephWalks takes seeded random walks of the Ceph world among every
// transition it has.
func TestCephWalks(t *testing.T) {
	walkWorld(t, Options{Ceph: true, HandChanges: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true}, "the Ceph world", 3)
}

// TestCephHand: someone rotates the newest generation's key by hand on the
// monitor, at rest or during a rotation, beside crashes and the user's
// requests. As for InPlace (TestCephInPlaceHand), every refusal must name
// a way the state accepts, and the documented actions must give the
// consumers a key the monitor accepts.
func TestCephHand(t *testing.T) {
	explorePolicies(t, Options{Ceph: true, HandChanges: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "user: recover c1", "consumer", "someone rotates"}},
		envInt("REKEY_EXPLORE_CEPH_HAND_DEPTH", 7), map[string]func(*World) bool{
			"hand key served": func(w *World) bool {
				return w.HandRotated && w.Set.Status.Phase == v1.PhaseIdle && strings.HasSuffix(w.Pod.Creds[cephBase], cephKeySep+"hand")
			},
		})
}
