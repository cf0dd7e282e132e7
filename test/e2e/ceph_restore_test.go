package e2e

import (
	"maps"
	"slices"
	"testing"
	"time"

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

// TestCephRestoreBeforeEntityAdded, on a real mon: the set's spec gained
// client.rbb, whose key the consumers were given; the set is deleted
// (held by its consumer group under deletionPolicy Delete), its status and
// source Secret restored from a backup taken before client.rbb was added,
// and the policy set to Discard. The wind-down used to remove client.rbb.1
// as a generation nobody was given, and the consumers' key stopped
// authenticating; now it removes nothing and says how to go on
// (KeyMismatch naming the key and deletionPolicy Retain), and Retain lets
// the set go with the key still valid.
func TestCephRestoreBeforeEntityAdded(t *testing.T) {
	c := testenv.CephForTest(t)
	startManager(t, cp.Config, withCephWorkDir(c))
	ns := newNamespace(t)
	const a, b = "client.rba", "client.rbb"
	caps := v1.CephCaps{Mon: "profile rbd"}
	cs := cephSet(t, c, ns, "rb", v1.CephOverlapping, v1.CephEntity{Name: a, Caps: caps})
	cs.Spec.ConsumerGroups = []v1.ConsumerGroup{{Name: "nodes", Members: []string{"node-a"}}}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "rb", v1.PhaseIdle, 1)
	backupStatus, backupSource := *cs.Status.DeepCopy(), maps.Clone(sourceData(t, cs))
	updateSpec(t, ns, "rb", func(cs *v1.CredentialSet) {
		cs.Spec.Ceph.Entities = append(cs.Spec.Ceph.Entities, v1.CephEntity{Name: b, Caps: caps})
	})
	var bEntity, bKey string
	eventually(t, time.Minute, b+" distributed", func() (bool, string) {
		kr := secretData(t, ns, "rb-keys")[b+".keyring"]
		if len(kr) == 0 {
			return false, "no " + b + ".keyring"
		}
		bEntity, bKey = keyOf(t, kr)
		return true, ""
	})
	observed(t, "%s added and distributed as %s: the consumers started since run its key", b, bEntity)

	deleteWithPolicyDelete(t, ns, "rb")
	waitEvent(t, ns, "rb", string(reason.UsersInUse))
	restoreSet(t, ns, "rb", backupStatus, backupSource)
	updateSpec(t, ns, "rb", func(cs *v1.CredentialSet) { cs.Spec.DeletionPolicy = v1.DeletionDiscard })
	note := waitEventNoting(t, ns, "rb", reason.KeyMismatch, "holds no key for "+b)
	mustContain(t, "KeyMismatch event of the deleted set", note, "deletionPolicy to Retain")
	if !cephAuthenticates(t, c, bEntity, bKey) {
		t.Fatalf("%s no longer authenticates with the key its consumers were given", bEntity)
	}
	getSet(t, ns, "rb")
	observed(t, "the Discard wind-down held, %s kept: %s", bEntity, note)

	updateSpec(t, ns, "rb", func(cs *v1.CredentialSet) { cs.Spec.DeletionPolicy = v1.DeletionRetain })
	waitSetGone(t, ns, "rb")
	if !cephAuthenticates(t, c, bEntity, bKey) {
		t.Fatalf("after Retain let the set go, %s no longer authenticates", bEntity)
	}
}
