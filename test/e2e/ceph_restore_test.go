package e2e

import (
	"maps"
	"slices"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCephRestoredGeneration is TestRabbitMQRestoredGeneration's Ceph form
// (Overlapping), on a real mon: the set's status and source Secret
// restored from before a rotation, the cluster has that rotation's
// generation entity (client.rg.2), whose key its consumers were given and
// the status does not account for. The deletion's wind-down removed it
// with the other generations, and the consumers' key stopped
// authenticating; now the deletion is held (DualPasswordExists, naming
// recover) with client.rg.2 still authenticating, and recover resets the
// cluster to the current key, after which the deletion completes. (The
// refusal of a rotation from that state is TestOverlappingCrashLeftovers'.)
func TestCephRestoredGeneration(t *testing.T) {
	c := testenv.CephForTest(t)
	startManager(t, cp.Config, withCephWorkDir(c))
	ns := newNamespace(t)
	const entity = "client.rg"
	cs := cephSet(t, c, ns, "rg", v1.CephOverlapping, v1.CephEntity{Name: entity, Caps: v1.CephCaps{Mon: "profile rbd"}})
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardManual}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "rg", v1.PhaseIdle, 1)
	backupStatus, backupSource := *cs.Status.DeepCopy(), maps.Clone(sourceData(t, cs))
	rotate(t, ns, "rg", "r1")
	cs = waitPhase(t, ns, "rg", v1.PhaseDistributed, 1)
	newEntity, newKey := keyOf(t, secretData(t, ns, "rg-keys")[entity+".keyring"])
	if newEntity != entity+".2" {
		t.Fatalf("the rotation distributed %s, want %s.2", newEntity, entity)
	}
	restoreSet(t, ns, "rg", backupStatus, backupSource)
	observed(t, "status and source Secret restored from before r1, whose key %s the consumers were given", newEntity)
	kept := func(when string) {
		t.Helper()
		if !cephAuthenticates(t, c, newEntity, newKey) {
			t.Fatalf("%s: %s no longer authenticates with the key its consumers hold", when, newEntity)
		}
	}

	if err := k8s.Delete(ctxT(t), getSet(t, ns, "rg")); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "DualPasswordExists event of the deleted set", waitEventNoting(t, ns, "rg", reason.DualPasswordExists, "the set is deleted"), "kubectl rekey recover")
	kept("while the deletion is held")
	observed(t, "the deletion held, %s kept", newEntity)

	annotate(t, ns, "rg", engine.RecoverAnnotation, "c1")
	waitSetGone(t, ns, "rg")
	if got := cephEntities(t, c, entity+"."); !slices.Equal(got, []string{entity + ".1"}) {
		t.Fatalf("after recover and the wind-down the mon has %v, want %s.1 alone", got, entity)
	}
}
