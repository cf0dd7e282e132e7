package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Two sets on one cluster (twosets.go): db2 rotates, discards and is
// deleted (deletionPolicy Delete, which drops its user) while db is at
// every stage of its own rotation, the
// manager crashing at every persisted step of either, and a replica
// scaled in and rebuilt empty in between. Every invariant holds for both
// sets in every state; the test fails unless the exploration reached both
// sets Distributed at once, db2 gone while db was Distributed, and a
// replica rebuilt while db2 was Distributed.
func TestTwoSets(t *testing.T) {
	reached := map[string]bool{}
	o := Options{Instances: []string{"i0", "i1"}, Crashes: true, Scaling: true, TwoSets: true,
		Only: []string{"user: rotate r1", "consumer pod", "i1 scaled in", "i1 returns rebuilt empty",
			peerName + ": user: rotate r1", peerName + ": user: discard (active", peerName + ": consumer", peerName + ": user: delete"},
		Observe: func(w *World) {
			db, db2 := w.Set.Status.Phase, w.Peer.Set.Status.Phase
			reached["both Distributed"] = reached["both Distributed"] || db == v1.PhaseDistributed && db2 == v1.PhaseDistributed
			reached["db2 gone, db Distributed"] = reached["db2 gone, db Distributed"] || w.Peer.Gone && db == v1.PhaseDistributed
			reached["rebuilt, db2 Distributed"] = reached["rebuilt, db2 Distributed"] || w.instance("i1").Returned2 && db2 == v1.PhaseDistributed
		}}
	explorePath(t, o, envInt("REKEY_EXPLORE_TWOSETS_DEPTH", 5))
	for _, what := range []string{"both Distributed", "db2 gone, db Distributed", "rebuilt, db2 Distributed"} {
		if !reached[what] {
			t.Errorf("the exploration never reached %s", what)
		}
	}
}

// TestTwoSetsWalks takes seeded random walks of the two-set world among
// every transition of the default run (restores, switchovers, spec
// edits, hand changes, outages and deletions of the first set beside
// what db2's user does), within a time budget.
func TestTwoSetsWalks(t *testing.T) {
	o := DefaultOptions()
	o.TwoSets = true
	walkWorld(t, o, "two sets", 2)
}
