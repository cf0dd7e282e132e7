package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestCephTwoSets: two sets on one monitor (cephtwosets.go), db rotating
// client.app and db2 client.shop, each with its own consumer. db2 rotates
// and is deleted (deletionPolicy Delete) while db is at every stage of its
// own rotation, the monitor stopping and answering again, the manager
// crashing at every persisted step of either set. Every invariant holds
// for both sets in every state; the test fails unless both sets were
// Distributed at once and db2 was gone, its generations removed, while db
// was Distributed with both of its own.
func TestCephTwoSets(t *testing.T) {
	start, err := Start(Options{Ceph: true, TwoSets: true})
	if err != nil {
		t.Fatal(err)
	}
	if in := start.instance(cephMon); !in.acct(cephBase+".1").Marked || !in.acct(cephPeerBase+".1").Marked || cephEntityOf(start.Peer.Pod.Creds[cephPeerBase]) != cephPeerBase+".1" {
		t.Fatalf("the second set did not provision its own entity: %s", start.Summary())
	}
	var reached, gone bool
	o := Options{Ceph: true, TwoSets: true, Crashes: true,
		Only: []string{"user: rotate r1", "consumer pod", "mon",
			peerName + ": user: rotate r1", peerName + ": consumer", peerName + ": user: delete"},
		Observe: func(w *World) {
			in := w.instance(cephMon)
			if w.Set.Status.Phase == v1.PhaseDistributed && w.Peer.Set.Status.Phase == v1.PhaseDistributed {
				reached = true
			}
			if w.Peer.Gone && w.Set.Status.Phase == v1.PhaseDistributed && !in.acct(cephPeerBase+".1").Exists && !in.acct(cephPeerBase+".2").Exists &&
				in.acct(cephBase+".1").Marked && in.acct(cephBase+".2").Marked {
				gone = true
			}
		}}
	explorePath(t, o, envInt("REKEY_EXPLORE_CEPH_TWOSETS_DEPTH", 5))
	if !reached || !gone {
		t.Errorf("the exploration never reached both sets Distributed (%v), db2 gone while db was Distributed (%v)", reached, gone)
	}
}

// TestCephTwoSetsBeside: from both sets' rotations distributed, one set's
// discard and abort, its pod's restarts and the manager's crashes; then
// db's deletion (deletionPolicy Discard) beside db2's rotation
// distributed. It fails unless each set's discard removed
// its first generation, and its abort its second, while the other was
// Distributed with both of its own recorded, and db was wound down
// (client.app's current generation kept without its record) while db2
// was Distributed.
func TestCephTwoSetsBeside(t *testing.T) {
	depth := envInt("REKEY_EXPLORE_CEPH_TWOSETS_BESIDE_DEPTH", 5)
	// both: the other set is Distributed with both of its generations
	// recorded, and me (of base) is at rest with generation g removed.
	both := func(w *World, base string) bool {
		in := w.instance(cephMon)
		other := w.Set
		if base == cephBase {
			other = w.Peer.Set
		}
		ob := cephKeys(other)[0]
		return other.Status.Phase == v1.PhaseDistributed && in.acct(ob+".1").Marked && in.acct(ob+".2").Marked
	}
	for _, c := range []struct{ name, prefix, other, base string }{
		{"db, db2 Distributed", "", peerName + ": ", cephBase},
		{"db2, db Distributed", peerName + ": ", "", cephPeerBase},
	} {
		t.Run(c.name, func(t *testing.T) {
			note, mine := "", ""
			if c.other != "" {
				note = " (reconciling " + peerName + ")"
			} else {
				mine = " (reconciling " + peerName + ")"
			}
			var discarded, aborted bool
			o := Options{Ceph: true, TwoSets: true, Crashes: true,
				Only: []string{c.prefix + "user: discard (active", c.prefix + "user: abort (active", c.prefix + "consumer pod", c.other + "consumer pod"},
				Observe: func(w *World) {
					me, in := w.Set.Status, w.instance(cephMon)
					if c.prefix != "" {
						me = w.Peer.Set.Status
					}
					rest := me.Phase == v1.PhaseIdle && both(w, c.base)
					discarded = discarded || rest && me.LastRotationID == "r1" && !in.acct(c.base+".1").Exists && in.acct(c.base+".2").Marked
					aborted = aborted || rest && me.LastRolledBackID == "r1" && !me.ResetPending && !in.acct(c.base+".2").Exists && in.acct(c.base+".1").Marked
				}}
			w := replayLabels(t, Options{Ceph: true, TwoSets: true, Crashes: true}, []string{c.other + "user: rotate r1", "reconcile" + note, c.prefix + "user: rotate r1", "reconcile" + mine})
			exploreFrom(t, w, o, depth)
			if !discarded || !aborted {
				t.Errorf("never reached %s: discarded %v, rolled back %v", c.name, discarded, aborted)
			}
		})
	}
	t.Run("db deleted (Discard), db2 Distributed", func(t *testing.T) {
		wound := false
		o := Options{Ceph: true, TwoSets: true, Crashes: true, Deletion: true, Policy: v1.DeletionDiscard,
			Only: []string{"user: delete the set", "user: delete the consumer", "consumer pod", peerName + ": consumer pod"},
			Observe: func(w *World) {
				a := w.instance(cephMon).acct(cephBase + ".1")
				wound = wound || w.Gone && a.Exists && !a.Marked && both(w, cephBase)
			}}
		w := replayLabels(t, Options{Ceph: true, TwoSets: true, Crashes: true, Deletion: true, Policy: v1.DeletionDiscard}, []string{peerName + ": user: rotate r1", "reconcile (reconciling " + peerName + ")"})
		exploreFrom(t, w, o, depth)
		if !wound {
			t.Error("never reached db wound down (client.app.1 kept without its record) while db2 was Distributed")
		}
	})
}
