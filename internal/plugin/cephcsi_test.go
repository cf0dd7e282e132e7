package plugin

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestCephCSITargets: rotate --dry-run says what a target in a ceph-csi
// format gets, and show reads the Native target of a set that also has
// CephCSI targets, or says how to read the key when it has none.
func TestCephCSITargets(t *testing.T) {
	ns := namespace(t)
	cs := cephSet(ns, "rook-csi", v1.CephOverlapping, "client.csi-rbd-node", "client.csi-cephfs-node")
	cs.Spec.Distribution = []v1.SecretTarget{
		{Namespace: ns, Name: "rook-csi-rbd-node", Format: v1.FormatCephCSI, Entity: "client.csi-rbd-node"},
		{Namespace: ns, Name: "rook-csi-cephfs-node", Format: v1.FormatCephCSIWithAdmin, Entity: "client.csi-cephfs-node"},
		{Namespace: ns, Name: "rook-csi-keys"},
	}
	create(t, cs)
	setStatus(t, ns, "rook-csi", idle(2))
	out := dryRun(t, ns, "rook-csi")
	for _, l := range []string{
		"  " + ns + "/rook-csi-rbd-node (CephCSI: userID, userKey of client.csi-rbd-node's current generation)\n",
		"  " + ns + "/rook-csi-cephfs-node (CephCSIWithAdmin: userID, userKey, adminID, adminKey of client.csi-cephfs-node's current generation)\n",
		"  " + ns + "/rook-csi-keys\n",
		"  each other distribution Secret gets E.keyring, E.key, E.name and E.id for each entity E\n",
	} {
		if !strings.Contains(out, l) {
			t.Errorf("dry run lacks %q", l)
		}
	}

	secret(t, ns, "rook-csi-keys", map[string]string{"client.csi-rbd-node.key": csiKey})
	got, errOut, err := kubectl(t, ns, "show", "rook-csi", "--entity", "client.csi-rbd-node")
	if err != nil || got != csiKey+"\n" || errOut != "" {
		t.Errorf("show with a Native target after CephCSI ones: %v, stdout %q, stderr %q", err, got, errOut)
	}

	only := cephSet(ns, "csi-only", v1.CephOverlapping, "client.csi-rbd-provisioner")
	only.Spec.Distribution = []v1.SecretTarget{{Namespace: ns, Name: "rook-csi-rbd-provisioner", Format: v1.FormatCephCSI}}
	create(t, only)
	setStatus(t, ns, "csi-only", idle(1))
	mustFail(t, ns, "is in a ceph-csi format (userID/userKey), which show does not read: read the key with kubectl get secret -n "+ns+" rook-csi-rbd-provisioner", "show", "csi-only")
}
