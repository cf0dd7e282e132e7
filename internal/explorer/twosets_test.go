package explorer

import (
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Two sets on one cluster (twosets.go): each rotates, discards, aborts,
// recovers and is deleted (db2 with deletionPolicy Delete, which drops its
// user) while the other is at every stage of its own rotation, the
// manager crashing at every persisted step of either, and a replica
// scaled in and rebuilt empty in between. Every invariant holds for both
// sets in every state; the test fails unless the exploration reached both
// sets Distributed at once, db2 gone while db was Distributed, and a
// replica rebuilt while db2 was Distributed.
func TestTwoSets(t *testing.T) {
	reached := map[string]bool{}
	o := Options{Instances: []string{"i0", "i1"}, Crashes: true, Scaling: true, TwoSets: true,
		Only: []string{"user: rotate r1", "user: discard (active", "consumer pod", "i1 scaled in", "i1 returns rebuilt empty", peerName + ": "},
		Observe: func(w *World) {
			db, db2 := w.Set.Status.Phase, w.Peer.Set.Status.Phase
			reached["both Distributed"] = reached["both Distributed"] || db == v1.PhaseDistributed && db2 == v1.PhaseDistributed
			reached["db2 gone, db Distributed"] = reached["db2 gone, db Distributed"] || w.Peer.Gone && db == v1.PhaseDistributed
			reached["rebuilt, db2 Distributed"] = reached["rebuilt, db2 Distributed"] || w.instance("i1").Returned2 && db2 == v1.PhaseDistributed
		}}
	explorePath(t, o, envInt("REKEY_EXPLORE_TWOSETS_DEPTH", 7))
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
	start, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	seed := int64(envInt("REKEY_EXPLORE_SEED", 1))
	budget := time.Duration(envInt("REKEY_EXPLORE_SECONDS", 45)) * time.Second / 2
	r := Walk(start, o, seed, envInt("REKEY_EXPLORE_WALKS", 20), 40, budget)
	t.Logf("random walks of two sets (seed %d): %s", seed, r)
	recordRun(t, "random walks", seed, r)
	for _, v := range r.Violations {
		t.Error(v)
	}
	if r.States == 0 {
		t.Error("no state explored")
	}
}
