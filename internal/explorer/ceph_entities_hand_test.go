package explorer

import (
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// TestCephEntitiesHand: in the world with two entities, someone rotates
// client.two's key by hand (its newest generation, or its current one
// while a rotation's newer exists), beside a rotation, its discard and
// rollback, crashes and a restore from backup. The backend decides for
// each entity alike (TestTwoEntitiesOverlapping on a real mon); a hand
// rotation's refusals are proven on a real mon for client.app
// (TestCephOverlappingHandRotated, TestCephResetAfterHandRotation). Every
// refusal must name a way the state accepts, and the documented actions
// bring the set back to Idle with the pod logging in. The test fails
// unless both hand rotations of client.two happened and a refusal named
// client.two.
func TestCephEntitiesHand(t *testing.T) {
	o := Options{Ceph: true, Crashes: true, HandChanges: true, Backups: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "someone rotates " + cephBase2, "status"}}
	reach := map[string]func(*World) bool{
		"newest rotated by hand": func(w *World) bool { return handRotatedOf(w, cephBase2) && w.Set.Status.RotationID == "r1" },
		"current rotated by hand while r1's exists": func(w *World) bool {
			return handRotatedOf(w, cephBase2) && cephEntityOf(string(w.Source.Data[cephBase2])) == cephEntityIn(cephBase2, 1) &&
				w.instance(cephMon).acct(cephEntityIn(cephBase2, 1)).Primary == cephEntityIn(cephBase2, 1)+cephKeySep+handKey &&
				w.instance(cephMon).acct(cephEntityIn(cephBase2, 2)).Exists
		},
		"a refusal names client.two": func(w *World) bool {
			return handRotatedOf(w, cephBase2) && slices.ContainsFunc(w.Warnings, func(m string) bool { return strings.Contains(m, cephBase2) })
		},
	}
	reached := map[string]bool{}
	o.Observe = func(w *World) {
		for name, ok := range reach {
			reached[name] = reached[name] || ok(w)
		}
	}
	exploreFrom(t, startTwoEntities(t, o), o, envInt("REKEY_EXPLORE_CEPH_ENTITIES_HAND_DEPTH", 6))
	for _, name := range slices.Sorted(maps.Keys(reach)) {
		if !reached[name] {
			t.Errorf("never reached: %s", name)
		}
	}
}

// handRotatedOf: a person rotated a generation of base by hand on w's path.
func handRotatedOf(w *World, base string) bool {
	for name, a := range w.instance(cephMon).Users {
		if _, ok := cephGenerationOf(base, name); ok && a.Exists && byPerson(a.Primary) {
			return true
		}
	}
	return false
}

// The set's status and source Secret restored from before client.two was
// added, while r1's client.two.2 exists: rekey reads client.two's key back,
// the newest generation's. The set's generation stayed 1, and the next
// rotation asked for generation 2, not newer than client.two.2: a
// BackendError at every reconcile (found by TestCephEntitiesWalks, seed 4,
// 100 walks: 33 steps). The read back now records the generation of what
// it read. The test fails unless r2 was distributed after a read back.
func TestPathCephReadBackNewerGeneration(t *testing.T) {
	readBack, distributed := false, false
	o := Options{Ceph: true, Backups: true,
		Only: []string{"user: rotate r1", "user: rotate r2", "user: discard (active", "user: recover c1", "status", "consumer"},
		Observe: func(w *World) {
			two := cephEntityOf(string(w.Source.Data[cephBase2]))
			readBack = readBack || w.Set.Status.LastRotationID == "" && two == cephEntityIn(cephBase2, 2)
			distributed = distributed || readBack && w.Set.Status.RotationID == "r2" && w.Set.Status.Phase == v1.PhaseDistributed
		}}
	exploreFrom(t, addSecondEntity(t, o), o, envInt("REKEY_EXPLORE_CEPH_READBACK_DEPTH", 7))
	if !distributed {
		t.Errorf("never reached r2 distributed after %s's newer generation was read back (read back: %v)", cephBase2, readBack)
	}
}

// A reconcile from a copy of the set older than its status (a cache that
// lags) read back a rotation's key after it was distributed, when a person
// had changed it (ceph auth rotate): r2 distributed client.app.2's key, the
// person rotated it, and the lagging copy, still at Rotating, wrote the
// cluster's key into the source Secret as the pending one before its
// status write failed. The next reconcile served it under r2's restart
// value, so a pod restarted for r2 kept the key the person had rotated
// away, and the set went Idle with nothing left to restart it (found by
// TestCephPriorsWalks, seed 2, 60 walks: 10 steps). The read back now
// confirms the status first. From the replayed path, every state to depth
// 4 must keep the invariants.
func TestPathCephStaleReadBack(t *testing.T) {
	o := Options{Ceph: true, KeepPriors: 1, HandChanges: true, Crashes: true, StaleReads: true,
		Only: []string{"reconcile", "consumer", "user: discard (active"}}
	w, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	all := o
	all.Only = nil
	w = replayFrom(t, w, all, []string{"user: rotate r2", "manager crashes after rotate/pending-stored#1", "reconcile",
		"user: discard (active ID)", "someone rotates client.app's key by hand", "reconcile by a manager whose cache holds the set before its last status change"})
	if got := cephEntityOf(string(w.Source.Data[engine.PendingKey(cephBase)])); got != cephEntity(2) || byPerson(string(w.Source.Data[engine.PendingKey(cephBase)])) {
		t.Fatalf("the lagging copy changed the pending key to %q (%s)", w.Source.Data[engine.PendingKey(cephBase)], w.Summary())
	}
	exploreFrom(t, w, o, envInt("REKEY_EXPLORE_CEPH_STALE_DEPTH", 4))
}
