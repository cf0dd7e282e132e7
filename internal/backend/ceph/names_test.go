package ceph

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestNames(t *testing.T) {
	cases := []struct{ name, got, want string }{
		{"rotator Secret", RotatorSecretName("rook-ceph-admin-keyring"), "rook-ceph-admin-keyring-rotator"},
		{"generation 0 is the entity itself", GenerationEntity("client.csi", 0), "client.csi"},
		{"generation 3", GenerationEntity("client.csi", 3), "client.csi.3"},
		{"rendered keys", strings.Join([]string{KeyringKey("client.a"), KeyKey("client.a"), NameKey("client.a"), IDKey("client.a")}, " "),
			"client.a.keyring client.a.key client.a.name client.a.id"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestCSIEntity(t *testing.T) {
	set := func(ns, name string) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	ceph := func(entities ...string) *v1.CredentialSet {
		cs := set("rook-ceph", "csi")
		cs.Spec.Ceph = &v1.CephSpec{}
		for _, e := range entities {
			cs.Spec.Ceph.Entities = append(cs.Spec.Ceph.Entities, v1.CephEntity{Name: e})
		}
		return cs
	}
	target := func(entity string) v1.SecretTarget {
		return v1.SecretTarget{Namespace: "rook-ceph", Name: "csi-node", Format: v1.FormatCephCSI, Entity: entity}
	}
	cases := []struct {
		name string
		cs   *v1.CredentialSet
		t    v1.SecretTarget
		want string // entity, or the error's end
	}{
		{"the only entity", ceph("client.csi-rbd-node"), target(""), "client.csi-rbd-node"},
		{"the named entity", ceph("client.csi-rbd-node", "client.csi-rbd-provisioner"), target("client.csi-rbd-provisioner"), "client.csi-rbd-provisioner"},
		{"several, none named", ceph("client.a", "client.b"), target(""), "spec.ceph.entities has 2 entities: name the one it serves in its entity"},
		{"not in the set", ceph("client.a"), target("client.b"), "entity client.b is not in spec.ceph.entities"},
		{"not a client", ceph("mgr.a"), target(""), "mgr.a is not a client entity (ceph-csi connects as client.<userID>)"},
		{"not a Ceph set", set("shop", "orders"), target(""), "it writes a cephx entity's userID and userKey, for spec.ceph sets only"},
	}
	for _, c := range cases {
		got, err := CSIEntity(c.cs, c.t)
		if err != nil {
			got = err.Error()
			if !strings.HasPrefix(got, "distribution target rook-ceph/csi-node has format CephCSI: ") {
				t.Errorf("%s: error %q does not name the target", c.name, got)
			}
		}
		if !strings.HasSuffix(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
