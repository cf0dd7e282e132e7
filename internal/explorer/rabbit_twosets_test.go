package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestRabbitMQTwoSets: two sets on one broker (rabbittwosets.go), db with
// base app and db2 with base shop, each with its own consumer. db2
// rotates and is deleted (deletionPolicy Delete, which deletes its users
// once its consumer is gone) while db is at every stage of its own
// rotation, the broker stopping and answering again, the manager crashing
// at every persisted step of either set; then, from one set's rotation
// distributed, the other rotates and discards. Every invariant holds for
// both sets in every state; the test fails unless both sets were
// Distributed at once, db2 was gone with its users deleted while db was
// Distributed with both of its own, and each set's discard deleted its
// first user while the other was Distributed with both of its own.
func TestRabbitMQTwoSets(t *testing.T) {
	start, err := Start(Options{RabbitMQ: true, TwoSets: true})
	if err != nil {
		t.Fatal(err)
	}
	if in := start.instance(broker); !in.acct("app-g1").Marked || !in.acct("shop-g1").Marked || start.Peer.Pod.Creds[rabbitUserKey] != "shop-g1" {
		t.Fatalf("the second set did not provision its own user: %s", start.Summary())
	}
	depth := envInt("REKEY_EXPLORE_RABBITMQ_TWOSETS_DEPTH", 5)
	var reached, gone bool
	o := Options{RabbitMQ: true, TwoSets: true, Crashes: true,
		Only: []string{"user: rotate r1", "consumer pod", "broker",
			peerName + ": user: rotate r1", peerName + ": consumer", peerName + ": user: delete"},
		Observe: func(w *World) {
			in := w.instance(broker)
			if w.Set.Status.Phase == v1.PhaseDistributed && w.Peer.Set.Status.Phase == v1.PhaseDistributed {
				reached = true // both Distributed; and below, db2 gone
			}
			if w.Peer.Gone && w.Set.Status.Phase == v1.PhaseDistributed && !in.acct("shop-g1").Exists && in.acct("app-g1").Exists && in.acct("app-g2").Exists {
				gone = true
			}
		}}
	explorePath(t, o, depth)
	if !reached || !gone {
		t.Errorf("the exploration never reached both sets Distributed (%v), db2 gone while db was Distributed (%v)", reached, gone)
	}
	// One set's discard while the other is Distributed: replayed to the
	// other's rotation distributed, then explored.
	for _, c := range []struct{ name, prefix, other, first, second string }{
		{"db discards, db2 Distributed", "", peerName + ": ", "app", "shop"},
		{"db2 discards, db Distributed", peerName + ": ", "", "shop", "app"},
	} {
		t.Run(c.name, func(t *testing.T) {
			note := ""
			if c.other != "" {
				note = " (reconciling " + peerName + ")"
			}
			done := false
			o := Options{RabbitMQ: true, TwoSets: true, Crashes: true,
				Only: []string{c.prefix + "user: rotate r1", c.prefix + "user: discard (active", c.prefix + "consumer pod", "broker", c.other + "consumer pod"},
				Observe: func(w *World) {
					in, me, other := w.instance(broker), w.Set.Status, w.Peer.Set.Status
					if c.prefix != "" {
						me, other = other, me
					}
					done = done || me.LastRotationID == "r1" && me.Phase == v1.PhaseIdle && !in.acct(c.first+"-g1").Exists &&
						other.Phase == v1.PhaseDistributed && in.acct(c.second+"-g1").Exists && in.acct(c.second+"-g2").Exists
				}}
			w := replayLabels(t, Options{RabbitMQ: true, TwoSets: true, Crashes: true}, []string{c.other + "user: rotate r1", "reconcile" + note})
			exploreFrom(t, w, o, depth)
			if !done {
				t.Errorf("never reached %s", c.name)
			}
		})
	}
}

// TestRabbitMQTwoSetsWalks takes seeded random walks of two sets on one
// broker, the first adopting legacy (spec.rabbitmq.adopt), among every
// transition of the RabbitMQ world (the user's requests with fresh,
// repeated and stale IDs, crashes, restores, the broker not answering,
// hand changes, deletion and policy edits, stale reads) and db2's.
func TestRabbitMQTwoSetsWalks(t *testing.T) {
	walkWorld(t, Options{RabbitMQ: true, TwoSets: true, Adopt: true, HandChanges: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true},
		"two sets on one broker, one adopting a user", 3)
}
