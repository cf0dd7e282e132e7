package controller

import (
	"maps"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestTargetData: a Native target gets the backend's rendering as it is; a
// CephCSI target gets exactly its entity's id and key under ceph-csi's
// names (and the admin pair with CephCSIWithAdmin); a spec admission would
// refuse is refused here too, naming the target.
func TestTargetData(t *testing.T) {
	cs := &v1.CredentialSet{Spec: v1.CredentialSetSpec{Ceph: &v1.CephSpec{Entities: []v1.CephEntity{
		{Name: "client.csi-rbd-node"}, {Name: "client.csi-rbd-provisioner"},
	}}}}
	rendered := map[string][]byte{
		"client.csi-rbd-node.id": []byte("csi-rbd-node.3"), "client.csi-rbd-node.key": []byte("AQnode=="),
		"client.csi-rbd-node.name": []byte("client.csi-rbd-node.3"), "client.csi-rbd-node.keyring": []byte("[client.csi-rbd-node.3]\n\tkey = AQnode==\n"),
		"client.csi-rbd-provisioner.id": []byte("csi-rbd-provisioner.3"), "client.csi-rbd-provisioner.key": []byte("AQprov=="),
	}
	str := func(m map[string][]byte) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = string(v)
		}
		return out
	}
	for _, c := range []struct {
		target v1.SecretTarget
		want   map[string]string
		err    string
	}{
		{target: v1.SecretTarget{Name: "native"}, want: str(rendered)},
		{target: v1.SecretTarget{Name: "native", Format: v1.FormatNative}, want: str(rendered)},
		{target: v1.SecretTarget{Name: "node", Format: v1.FormatCephCSI, Entity: "client.csi-rbd-node"},
			want: map[string]string{"userID": "csi-rbd-node.3", "userKey": "AQnode=="}},
		{target: v1.SecretTarget{Name: "prov", Format: v1.FormatCephCSIWithAdmin, Entity: "client.csi-rbd-provisioner"},
			want: map[string]string{"userID": "csi-rbd-provisioner.3", "userKey": "AQprov==", "adminID": "csi-rbd-provisioner.3", "adminKey": "AQprov=="}},
		{target: v1.SecretTarget{Namespace: "ns", Name: "none", Format: v1.FormatCephCSI},
			err: "distribution target ns/none has format CephCSI: spec.ceph.entities has 2 entities: name the one it serves in its entity"},
		{target: v1.SecretTarget{Namespace: "ns", Name: "other", Format: v1.FormatCephCSI, Entity: "client.csi-cephfs-node"},
			err: "entity client.csi-cephfs-node is not in spec.ceph.entities"},
	} {
		got, err := targetData(cs, c.target, rendered)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.target.Name, err, c.err)
			}
			if checkTargetFormats(&v1.CredentialSet{Spec: v1.CredentialSetSpec{Ceph: cs.Spec.Ceph, Distribution: []v1.SecretTarget{c.target}}}) == nil {
				t.Errorf("%s: checkTargetFormats admits it", c.target.Name)
			}
			continue
		}
		if err != nil || !maps.Equal(str(got), c.want) {
			t.Errorf("%s: got %v, %v; want %v", c.target.Name, str(got), err, c.want)
		}
	}
	mysql := &v1.CredentialSet{Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{},
		Distribution: []v1.SecretTarget{{Namespace: "ns", Name: "app", Format: v1.FormatCephCSI}}}}
	if err := checkTargetFormats(mysql); err == nil || !strings.Contains(err.Error(), "for spec.ceph sets only") {
		t.Errorf("a CephCSI target on a MySQL set: %v", err)
	}
	stray := &v1.CredentialSet{Spec: v1.CredentialSetSpec{Ceph: cs.Spec.Ceph,
		Distribution: []v1.SecretTarget{{Namespace: "ns", Name: "keys", Entity: "client.csi-rbd-node"}}}}
	if err := checkTargetFormats(stray); err == nil || !strings.Contains(err.Error(), "names entity client.csi-rbd-node without a CephCSI or CephCSIWithAdmin format: set format CephCSI or CephCSIWithAdmin, or remove entity") {
		t.Errorf("an entity without a CephCSI format: %v", err)
	}
}
