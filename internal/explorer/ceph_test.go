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
	for _, policy := range []v1.DeletionPolicy{v1.DeletionDiscard, v1.DeletionDelete} {
		t.Run(string(policy), func(t *testing.T) {
			reached := map[string]bool{}
			o := Options{Ceph: true, Crashes: true, Backups: true, Deletion: true, Policy: policy,
				Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "user: recover c1", "consumer", "mon", "status and source", "user: delete the set", "user: delete the consumer"},
				Observe: func(w *World) {
					m := w.instance(cephMon)
					st := w.Set.Status
					reached["completed"] = reached["completed"] || st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && !m.acct(cephBase+".1").Exists
					reached["rolled back"] = reached["rolled back"] || st.LastRolledBackID == "r1" && !st.ResetPending && !m.acct(cephBase+".2").Exists
					reached["wound down"] = reached["wound down"] || woundDown(w)
				}}
			explorePath(t, o, envInt("REKEY_EXPLORE_CEPH_DEPTH", 5))
			for _, want := range []string{"completed", "rolled back", "wound down"} {
				if !reached[want] {
					t.Errorf("never reached: %s", want)
				}
			}
		})
	}
}

// TestCephWalks takes seeded random walks of the Ceph world among every
// transition it has.
func TestCephWalks(t *testing.T) {
	walkWorld(t, Options{Ceph: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true}, "the Ceph world", 3)
}
