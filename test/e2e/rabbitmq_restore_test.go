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

// TestRabbitMQRestoredGeneration: a RabbitMQ set whose members moved to a
// rotation's user has its status and source Secret restored from a backup
// taken before that rotation, on a real rabbitmq-server. The broker then
// has a generation of the set (the members' user) that the status does
// not account for. The next rotation would have given that generation's
// name a new password, and the wind-down of a deletion deleted it (the
// explorer's RabbitMQ model found the second, in 6 steps): the members
// were locked out either way. Now both are refused (DualPasswordExists,
// naming recover) with nothing changed on the broker; recover moves the
// members onto the current user, then deletes the other generation, and
// the deletion completes. No member login fails.
func TestRabbitMQRestoredGeneration(t *testing.T) {
	m := testenv.RabbitMQForTest(t)
	startManager(t, cp.Config)
	ns := newNamespace(t)
	f, backupStatus, backupSource := rabbitRolledOut(t, m, ns, "cinder")
	restoreSet(t, ns, "cinder", backupStatus, backupSource)
	observed(t, "status and source Secret restored from before r1, the member logging in as cinder-g2")
	both := []string{"cinder-g1", "cinder-g2"}

	rotate(t, ns, "cinder", "r2")
	mustContain(t, "DualPasswordExists event", waitEventNoting(t, ns, "cinder", reason.DualPasswordExists, "cinder-g2"), "kubectl rekey recover")
	if u := rabbitUsers(t, m, "cinder"); !slices.Equal(u, both) {
		t.Fatalf("the refused rotation changed the broker's users: %v", u)
	}
	if err := k8s.Delete(ctxT(t), getSet(t, ns, "cinder")); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "DualPasswordExists event of the deleted set", waitEventNoting(t, ns, "cinder", reason.DualPasswordExists, "the set is deleted"), "kubectl rekey recover")
	if u := rabbitUsers(t, m, "cinder"); !slices.Equal(u, both) {
		t.Fatalf("the held deletion changed the broker's users: %v", u)
	}
	observed(t, "the rotation and the deletion refused, the broker unchanged: %v", both)

	annotate(t, ns, "cinder", engine.RecoverAnnotation, "c1")
	waitFor(t, time.Minute, "recover serves the current user", func() (bool, string) {
		u := string(secretData(t, ns, "cinder-transport")["username"])
		return u == "cinder-g1", u
	})
	hash := waitHash(t, ns, "cinder")
	f.deploy(t, ns, "cinder-transport", "n0")
	if _, err := ack(t, ns, "cinder", "nodes", hash, "n0"); err != nil {
		t.Fatal(err)
	}
	waitSetGone(t, ns, "cinder")
	if u := rabbitUsers(t, m, "cinder"); !slices.Equal(u, []string{"cinder-g1"}) {
		t.Fatalf("after recover and the wind-down the broker has %v, want the current user alone", u)
	}
	f.assertNoGap(t)
}

// rabbitRolledOut makes a RabbitMQ set name whose consumer group's member
// n0 is deployed by a fleet, and rotates it (r1, discard manual) until the
// member runs r1's user and the rotation rolled out. It returns the fleet
// and the set's status and source Secret as they were before r1 (a
// backup).
func rabbitRolledOut(t *testing.T, m *testenv.RabbitMQ, ns, name string) (*fleet, v1.CredentialSetStatus, map[string][]byte) {
	t.Helper()
	cs := rabbitSet(t, ns, name, m, v1.ConsumerGroup{Name: "nodes", Members: []string{"n0"}})
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardManual}
	if err := k8sCreate(t, cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, name, v1.PhaseIdle, 1)
	backupStatus, backupSource := *cs.Status.DeepCopy(), maps.Clone(sourceData(t, cs))
	f := startFleet(t, m)
	f.deploy(t, ns, name+"-transport", "n0")
	rotate(t, ns, name, "r1")
	waitPhase(t, ns, name, v1.PhaseDistributed, 1)
	hash := waitHash(t, ns, name)
	f.deploy(t, ns, name+"-transport", "n0")
	if _, err := ack(t, ns, name, "nodes", hash, "n0"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "rotation r1 rolled out", func() (bool, string) {
		cs := getSet(t, ns, name)
		return cs.Status.RolledOutAt != nil, stateOf(cs)
	})
	return f, backupStatus, backupSource
}
