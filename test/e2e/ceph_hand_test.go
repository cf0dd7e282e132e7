package e2e

import (
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCephInPlaceHandRotated: a person rotates an InPlace set's key by
// hand on a real mon (`ceph auth rotate`), once at rest and once during a
// rotation whose consumer pods (which read their Secret at start) already
// run its new key; they are refused from then on, the person's doing.
// At rest, the set's next reconcile reports it (KeyMismatch, naming the
// way out) before any rotation is asked for. During the rotation, its
// discard is refused naming the rotation's pending key, not recover or
// abort (the old key died when the rotation replaced it). Each time, once
// the person deletes what the message names from the source Secret, rekey
// reads the mon's key back, serves it, restarts the pods onto it (again,
// during the rotation), and the rotation completes; no pod login is
// refused after the last rollout. Before, nothing was reported at rest,
// and the discard's refusal said "then recover", which an InPlace rotation
// refuses: a dead end short of editing the mon by hand.
func TestCephInPlaceHandRotated(t *testing.T) {
	const name, entity = "hand", "client.hand"
	c, ns, pc := cephSetWithPods(t, name, entity, v1.CephInPlace, v1.DiscardManual)

	// At rest.
	handRotate(t, c, entity)
	annotate(t, ns, name, "e2e.rekey.io/poke", "1") // any reconcile; the manager's resync does it in production
	mustContain(t, "the report at rest", waitEventNoting(t, ns, name, reason.KeyMismatch, "not the one the source Secret holds"),
		"delete "+entity+" from the source Secret")
	editSource(t, getSet(t, ns, name), func(data map[string][]byte) { delete(data, entity) })
	mustContain(t, "the read back", waitEventNoting(t, ns, name, reason.Provisioned, "read back from the backend"), entity)
	waitServed(t, c, ns, name, entity)
	assertNoRefusalsSince(t, pc)

	// During a rotation, once its pods run its new key.
	rotate(t, ns, name, "r1")
	waitRolledOut(t, ns, name)
	handRotate(t, c, entity)
	discard(t, ns, name, "r1")
	note := waitEventNoting(t, ns, name, reason.PendingRejected, "changed outside rekey")
	mustContain(t, "the discard's refusal", note, "delete "+engine.PendingKey(entity)+" from the source Secret")
	if st := getSet(t, ns, name).Status; st.Phase != v1.PhaseDistributed || st.DiscardApplied {
		t.Fatalf("the discard went ahead while the mon refuses the rotation's key: %+v", st)
	}
	editSource(t, getSet(t, ns, name), func(data map[string][]byte) { delete(data, engine.PendingKey(entity)) })
	waitFor(t, 3*time.Minute, "r1 read back, distributed again, discarded and confirmed", func() (bool, string) {
		cs := getSet(t, ns, name)
		st := cs.Status
		return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle, stateOf(cs)
	})
	waitServed(t, c, ns, name, entity)
	assertNoRefusalsSince(t, pc)
}

// handRotate is a person's `ceph auth rotate` of entity on the mon.
func handRotate(t *testing.T, c *testenv.Ceph, entity string) {
	t.Helper()
	if _, err := c.CLI(ctxT(t), "auth", "rotate", entity); err != nil {
		t.Fatal(err)
	}
	observed(t, "%s rotated by hand on the mon", entity)
}

// waitServed waits until the distribution Secret serves the key the mon
// holds for the entity it names (entity, or one of its generations).
func waitServed(t *testing.T, c *testenv.Ceph, ns, name, entity string) {
	t.Helper()
	waitFor(t, 3*time.Minute, "the mon's key of "+entity+" served", func() (bool, string) {
		held, served := keyOf(t, secretData(t, ns, name+"-keys")[entity+".keyring"])
		now, err := c.Key(ctxT(t), held)
		if err != nil {
			return false, err.Error()
		}
		return served == now, stateOf(getSet(t, ns, name))
	})
}

// TestCephOverlappingHandRotated: the same on an Overlapping set, where
// each generation is an entity of its own. A person rotates the current
// generation's key by hand once r1's pods run r1's generation: an abort is
// refused (rolling back would restart the pods onto the key the mon now
// refuses), naming the discard, which then completes. Then a person
// rotates r2's new generation by hand once r2's pods run it: the discard
// is refused naming r2's pending key; deleted, r2 reads the generation's
// key back, restarts the pods onto it and completes. No pod login is
// refused after the last rollout. Before, the abort went ahead, and the
// discard's refusal said to run recover, which cannot set a key Ceph
// minted back.
func TestCephOverlappingHandRotated(t *testing.T) {
	const name, entity = "ovh", "client.ovh"
	c, ns, pc := cephSetWithPods(t, name, entity, v1.CephOverlapping, v1.DiscardManual)

	rotate(t, ns, name, "r1")
	waitRolledOut(t, ns, name)
	handRotate(t, c, entity+".1")
	annotate(t, ns, name, engine.AbortAnnotation, "r1")
	mustContain(t, "the abort's refusal", waitEventNoting(t, ns, name, reason.AbortSkipped, "is not rolled back"), "kubectl rekey discard")
	discard(t, ns, name, "r1")
	waitPhase(t, ns, name, v1.PhaseIdle, 2)
	waitServed(t, c, ns, name, entity)
	assertNoRefusalsSince(t, pc)

	rotate(t, ns, name, "r2")
	waitRolledOut(t, ns, name)
	handRotate(t, c, entity+".3")
	discard(t, ns, name, "r2")
	mustContain(t, "the discard's refusal", waitEventNoting(t, ns, name, reason.PendingRejected, "changed outside rekey"),
		"delete "+engine.PendingKey(entity)+" from the source Secret")
	editSource(t, getSet(t, ns, name), func(data map[string][]byte) { delete(data, engine.PendingKey(entity)) })
	waitPhase(t, ns, name, v1.PhaseIdle, 3)
	waitServed(t, c, ns, name, entity)
	assertNoRefusalsSince(t, pc)
}
