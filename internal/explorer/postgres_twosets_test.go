package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestPostgresTwoSets: two sets on one PostgreSQL cluster (pgtwosets.go),
// db with base app and db2 with base shop, each with its own group and
// consumer. db2 rotates, recovers and is deleted
// (deletionPolicy Delete, which drops its roles once its consumer is
// gone) while db rotates, the replica stopping, pausing and resuming its
// replay, the manager crashing at every persisted step of either set;
// then, from one set's rotation distributed, the other rotates and
// discards, rolls back, or recovers. Every invariant holds for both sets in every
// state; the test fails unless both sets were Distributed at once, db2
// was gone with its roles dropped on both instances while db was
// Distributed with both of its own, and each set's discard dropped its
// first role, its rollback its new one, and its recovery at rest reset
// its current one, while the other was Distributed with both of its own.
// REKEY_EXPLORE_POSTGRES_TWOSETS_DEPTH sets the depth.
func TestPostgresTwoSets(t *testing.T) {
	start, err := Start(Options{Postgres: true, TwoSets: true})
	if err != nil {
		t.Fatal(err)
	}
	if in := start.instance(pgReplica); !in.acct("app_g1").Marked || !in.acct("shop_g1").Marked || start.Peer.Pod.Creds[pgUserKey] != "shop_g1" {
		t.Fatalf("the second set did not provision its own login: %s", start.Summary())
	}
	depth := envInt("REKEY_EXPLORE_POSTGRES_TWOSETS_DEPTH", 5)
	both := func(w *World, role string) bool {
		return w.instance(pgPrimary).acct(role).Exists && w.instance(pgReplica).acct(role).Exists
	}
	neither := func(w *World, role string) bool {
		return !w.instance(pgPrimary).acct(role).Exists && !w.instance(pgReplica).acct(role).Exists
	}
	var reached, gone, released bool
	o := Options{Postgres: true, TwoSets: true, Crashes: true, Deletion: true,
		Only: []string{"user: rotate r1", "user: delete the set", "consumer pod", pgReplica,
			peerName + ": user: rotate r1", peerName + ": user: recover c1", peerName + ": consumer", peerName + ": user: delete"},
		Observe: func(w *World) {
			me, other := w.Set.Status, w.Peer.Set.Status
			reached = reached || me.Phase == v1.PhaseDistributed && other.Phase == v1.PhaseDistributed
			released = released || w.Gone && !w.instance(pgPrimary).acct("app_g1").Marked && both(w, "app_g1") &&
				other.Phase == v1.PhaseDistributed && both(w, "shop_g1") && both(w, "shop_g2")
			gone = gone || w.Peer.Gone && me.Phase == v1.PhaseDistributed && neither(w, "shop_g1") && both(w, "app_g1") && both(w, "app_g2")
		}}
	explorePath(t, o, depth)
	if !reached || !gone || !released {
		t.Errorf("the exploration never reached both sets Distributed (%v), db2 gone while db was Distributed (%v), db gone (Discard: its login released) while db2 was Distributed (%v)", reached, gone, released)
	}
	// One set's discard while the other is Distributed: replayed to the
	// other's rotation distributed, then explored.
	for _, c := range []struct{ name, prefix, other, first, second string }{
		{"db discards, rolls back or recovers, db2 Distributed", "", peerName + ": ", "app", "shop"},
		{"db2 discards, rolls back or recovers, db Distributed", peerName + ": ", "", "shop", "app"},
	} {
		t.Run(c.name, func(t *testing.T) {
			note := ""
			if c.other != "" {
				note = " (reconciling " + peerName + ")"
			}
			var done, rolledBack, reset bool
			o := Options{Postgres: true, TwoSets: true, Crashes: true,
				Only: []string{c.prefix + "user: rotate r1", c.prefix + "user: discard (active", c.prefix + "user: abort (active", c.prefix + "user: recover c1", c.prefix + "consumer pod", pgReplica, c.other + "consumer pod"},
				Observe: func(w *World) {
					me, other := w.Set.Status, w.Peer.Set.Status
					if c.prefix != "" {
						me, other = other, me
					}
					done = done || me.LastRotationID == "r1" && me.Phase == v1.PhaseIdle && neither(w, c.first+"_g1") &&
						other.Phase == v1.PhaseDistributed && both(w, c.second+"_g1") && both(w, c.second+"_g2")
					reset = reset || me.LastRecoverID == "c1" && !me.ResetPending && me.Phase == v1.PhaseIdle && both(w, c.first+"_g1") &&
						other.Phase == v1.PhaseDistributed && both(w, c.second+"_g1") && both(w, c.second+"_g2")
					rolledBack = rolledBack || me.LastRolledBackID == "r1" && !me.ResetPending && both(w, c.first+"_g1") && neither(w, c.first+"_g2") &&
						other.Phase == v1.PhaseDistributed && both(w, c.second+"_g1") && both(w, c.second+"_g2")
				}}
			w := replayLabels(t, Options{Postgres: true, TwoSets: true, Crashes: true}, []string{c.other + "user: rotate r1", "reconcile" + note})
			exploreFrom(t, w, o, depth)
			if !done || !rolledBack || !reset {
				t.Errorf("never reached %s: the discard completed (%v), the rotation rolled back (%v), a recovery's reset at rest (%v)", c.name, done, rolledBack, reset)
			}
		})
	}
}

// TestPostgresTwoSetsWalks takes seeded random walks of two sets on one
// PostgreSQL cluster among every transition of the PostgreSQL world (the
// user's requests with fresh, repeated and stale IDs, crashes, restores,
// the replica not answering and its replay paused, the outside client, a
// person's change of a role's password, deletion and policy edits, stale
// reads) and db2's.
func TestPostgresTwoSetsWalks(t *testing.T) {
	walkWorld(t, Options{Postgres: true, TwoSets: true, HandChanges: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true},
		"two sets on one PostgreSQL cluster", 3)
}
