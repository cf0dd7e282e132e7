package plugin

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// dryRun runs rotate --dry-run and checks that it changed nothing.
func dryRun(t *testing.T, ns, name string) string {
	t.Helper()
	before := get(t, ns, name).ResourceVersion
	out, errOut, err := kubectl(t, ns, "rotate", name, "--dry-run")
	if err != nil || errOut != "" {
		t.Fatalf("rotate %s --dry-run: %v, stderr %q", name, err, errOut)
	}
	if after := get(t, ns, name); after.ResourceVersion != before || after.Annotations[engine.RotateAnnotation] != "" {
		t.Fatalf("--dry-run changed %s", name)
	}
	t.Logf("rotate %s --dry-run:\n%s", name, out)
	return out
}

func TestRotateDryRunCephInPlace(t *testing.T) {
	ns := namespace(t)
	create(t, cephSet(ns, "daemons", v1.CephInPlace, "mgr.a", "client.admin"))
	setStatus(t, ns, "daemons", idle(2))
	out := dryRun(t, ns, "daemons")
	for _, l := range []string{
		"Dry run: nothing was changed. A rotation of credentialset " + ns + "/daemons would move generation 2 to 3.",
		"Monitors (2; rekey runs the ceph CLI as client.admin, keyring from Secret " + ns + "/ceph-admin):",
		"  v2:10.0.0.1:3300",
		"  10.0.0.2:6789",
		"Strategy InPlace: ceph auth rotate replaces each key. Unlike MySQL, the old key stops working at once, at rotate time, not at discard; the consumers restart right after, and running daemons carry on on their service tickets meanwhile.",
		"Entities (2):",
		"  mgr.a",
		"  client.admin  (rekey connects as this entity; its key rotates through client.admin-rotator)",
		"Secrets to update:",
		"  source Secret rekey." + ns + ".daemons in the operator's namespace (the new keys Ceph mints are read back into it)",
		"  " + ns + "/daemons-keys",
		"  each distribution Secret gets E.keyring, E.key, E.name and E.id for each entity E",
		"  admin keyring Secret " + ns + "/ceph-admin (client.admin is one of the entities; while it rotates, the temporary client.admin-rotator's keyring is kept in " + ns + "/ceph-admin-rotator)",
		"Workloads to restart:",
		"  DaemonSet " + ns + "/csi-rbdplugin (not found: discard would wait for it forever)",
		"Then: once consumers rolled out and work, run kubectl rekey discard daemons -n " + ns + " (discardPolicy Manual); discard retires nothing, the old keys are already gone since rotate (InPlace).",
	} {
		hasLine(t, out, l)
	}
	// InPlace creates no entity: no caps, no generation names.
	if strings.Contains(out, "new entity") || strings.Contains(out, "caps") {
		t.Errorf("an InPlace plan speaks of new entities:\n%s", out)
	}
}

func TestRotateDryRunCephOverlapping(t *testing.T) {
	ns := namespace(t)
	cs := cephSet(ns, "csi", v1.CephOverlapping, "client.csi", "client.csi-cephfs")
	cs.Spec.Ceph.Entities[1].Caps = v1.CephCaps{MDS: "allow rw"}
	cs.Spec.Ceph.KeepPriorKeyCount = ptr.To(int32(2))
	// The policy asks for generation 7: a rotation jumps there.
	cs.Spec.Rotation = v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: ptr.To(int64(7)), DiscardPolicy: v1.DiscardAfterRollout}
	create(t, cs)
	setStatus(t, ns, "csi", idle(3))
	out := dryRun(t, ns, "csi")
	for _, l := range []string{
		"Dry run: nothing was changed. A rotation of credentialset " + ns + "/csi would move generation 3 to 7.",
		"Strategy Overlapping: each entity gets a new entity for generation 7 with the same caps, next to the current one; both work until discard (keepPriorKeyCount 2 says how many prior entities stay after it).",
		"Entities (2):",
		`  client.csi         new entity client.csi.7         caps mon 'profile rbd' osd 'profile rbd pool=rbd'`,
		`  client.csi-cephfs  new entity client.csi-cephfs.7  caps mds 'allow rw'`,
		"Then: once every consumer rolled out and the grace period passed, the rotation completes automatically (discardPolicy AfterRollout); discard keeps each entity's 2 newest prior entities (keepPriorKeyCount) and deletes older ones.",
	} {
		hasLine(t, out, l)
	}
	if strings.Contains(out, "admin keyring Secret") || strings.Contains(out, "Unlike MySQL") {
		t.Errorf("an Overlapping plan without the admin speaks of the admin or of InPlace:\n%s", out)
	}

	// keepPriorKeyCount 0: the prior entities go at discard.
	cs = cephSet(ns, "zero", v1.CephOverlapping, "client.csi")
	cs.Spec.Ceph.KeepPriorKeyCount = ptr.To(int32(0))
	create(t, cs)
	setStatus(t, ns, "zero", idle(1))
	hasLine(t, dryRun(t, ns, "zero"), "Then: once consumers rolled out and work, run kubectl rekey discard zero -n "+ns+" (discardPolicy Manual); discard deletes the prior entities (keepPriorKeyCount 0), so their keys stop working.")
}

func TestRotateDryRunRabbitMQ(t *testing.T) {
	ns, other := namespace(t), namespace(t)
	create(t, rabbitSet(ns, "nova"))
	setStatus(t, ns, "nova", func(st *v1.CredentialSetStatus) { idle(4)(st); st.Cluster = "rabbit@rmq-0" })
	// A set elsewhere on the same broker, whose consumers have not all
	// moved, and one on another broker.
	peer := rabbitSet(other, "neutron")
	peer.Spec.RabbitMQ.User.Base = "neutron"
	create(t, peer)
	setStatus(t, other, "neutron", func(st *v1.CredentialSetStatus) {
		idle(2)(st)
		st.Cluster = "rabbit@rmq-0"
		st.Consumers = []v1.ConsumerStatus{{Kind: v1.KindStatefulSet, Namespace: other, Name: "nova-api", RolledOut: true}, {Kind: v1.KindGroup, Name: "edpm-compute"}}
	})
	elsewhere := rabbitSet(other, "cinder")
	elsewhere.Spec.RabbitMQ.User.Base = "cinder"
	create(t, elsewhere)
	setStatus(t, other, "cinder", func(st *v1.CredentialSetStatus) { idle(1)(st); st.Cluster = "rabbit@other" })

	out := dryRun(t, ns, "nova")
	for _, l := range []string{
		"Dry run: nothing was changed. A rotation of credentialset " + ns + "/nova would move generation 4 to 5.",
		"Endpoint: https://rabbitmq.openstack.svc:15671 (management API; rekey acts as the user in Secret " + ns + "/rabbit-admin)",
		"New user: nova-g5, created next to the current one (a new user <base>-g<N> per generation); both work until discard",
		"Tags: monitoring",
		"Permissions:",
		`  vhost /  configure ''  write '^nova\.'  read '.*'`,
		"Topic permissions:",
		`  vhost /  exchange amq.topic  write '^nova\.'  read '.*'`,
		"  source Secret rekey." + ns + ".nova in the operator's namespace (the new user's password is stored there before the user is created)",
		"  " + ns + "/nova-transport",
		"  each distribution Secret gets username, password, transport_url, 01-nova.conf",
		"Workloads to restart:",
		"  StatefulSet " + ns + "/nova-api (not found: discard would wait for it forever)",
		"Consumer groups (outside automation reports updated members with kubectl rekey ack):",
		"  edpm-compute  3 members",
		"Then: once consumers rolled out and work, run kubectl rekey discard nova -n " + ns + " (discardPolicy Manual). The old user is deleted once every consumer of this set moved to the new one (status.retirementWaitsFor lists those that have not).",
	} {
		hasLine(t, out, l)
	}
	// Other sets on the cluster hold users of their own: none is listed.
	if strings.Contains(out, "cinder") || strings.Contains(out, "neutron") {
		t.Errorf("another set is listed:\n%s", out)
	}

}
