package explorer

import (
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
	walkWorld(t, Options{Ceph: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true}, "the Ceph world", 3)
}
