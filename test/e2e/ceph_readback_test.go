package e2e

import (
	"maps"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCephReadBackNewerGeneration, on a real mon: an Overlapping set
// keeping no prior generation rotated once (client.rn.2 current, client.rn.1 gone), then its status
// and source Secret restored from a backup taken at generation 1, whose
// key the mon no longer has. The refusal says to delete the key from the
// source Secret; rekey reads the cluster's back: client.rn.2's. The set's
// generation stayed 1, so the next rotation asked for generation 2, which
// is not newer than client.rn.2: a BackendError at every reconcile, and
// nothing the user could do (found by the explorer's two-entity walks,
// seed 4). Now the read back records the generation of what it read, and
// the rotation mints client.rn.3.
func TestCephReadBackNewerGeneration(t *testing.T) {
	c := testenv.CephForTest(t)
	startManager(t, cp.Config, withCephWorkDir(c))
	ns := newNamespace(t)
	const entity = "client.rn"
	cs := cephSet(t, c, ns, "rn", v1.CephOverlapping, v1.CephEntity{Name: entity, Caps: v1.CephCaps{Mon: "profile rbd"}})
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardManual}
	none := int32(0) // the discard removes client.rn.1
	cs.Spec.Ceph.KeepPriorKeyCount = &none
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "rn", v1.PhaseIdle, 1)
	backupStatus, backupSource := *cs.Status.DeepCopy(), maps.Clone(sourceData(t, cs))
	rotate(t, ns, "rn", "r1")
	waitPhase(t, ns, "rn", v1.PhaseDistributed, 1)
	discard(t, ns, "rn", "r1")
	cs = waitPhase(t, ns, "rn", v1.PhaseIdle, 2)

	restoreSet(t, ns, "rn", backupStatus, backupSource)
	note := waitEventNoting(t, ns, "rn", reason.PendingRejected, "otherwise delete "+entity+" from the source Secret")
	observed(t, "status and source Secret restored from generation 1, whose key the mon no longer has: %s", note)
	editSource(t, cs, func(data map[string][]byte) { delete(data, entity) })
	waitEventNoting(t, ns, "rn", reason.Provisioned, "read back from the backend")
	if got, _ := keyOf(t, sourceData(t, cs)[entity]); got != entity+".2" {
		t.Fatalf("read back %s, want %s.2", got, entity)
	}
	observed(t, "%s.2 read back", entity)

	// On the code before, the set read Idle and Healthy at generation 1,
	// and r2 never left Rotating (BackendError "generation 2 is not newer
	// than client.rn's current generation 2").
	rotate(t, ns, "rn", "r2")
	waitPhase(t, ns, "rn", v1.PhaseDistributed, 2)
	newEntity, newKey := keyOf(t, secretData(t, ns, "rn-keys")[entity+".keyring"])
	if newEntity != entity+".3" || !cephAuthenticates(t, c, newEntity, newKey) {
		t.Fatalf("r2 distributed %s (authenticates: %v), want %s.3", newEntity, cephAuthenticates(t, c, newEntity, newKey), entity)
	}
}
