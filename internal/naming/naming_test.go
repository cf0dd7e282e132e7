package naming

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestNamesAreValidKubernetesKeys: every annotation and finalizer rekey
// makes from user-chosen names is a qualified name the API server
// accepts, however long the names, and distinct sets get distinct ones.
func TestNamesAreValidKubernetesKeys(t *testing.T) {
	long := strings.Repeat("a", 253)
	cases := []struct {
		name     string
		got      string
		wantPref string
	}{
		{"restart, short set", RestartAnnotation(set("shop", "orders")), "rekey.io/restart-orders-"},
		{"restart, longest set name", RestartAnnotation(set("shop", long)), "rekey.io/restart-aaaa"},
		{"consumer finalizer, short", ConsumerFinalizer(v1.KindDeployment, "shop", "api"), ConsumerFinalizerPrefix + "deployment-api-"},
		{"consumer finalizer, longest name", ConsumerFinalizer(v1.KindStatefulSet, "shop", long), ConsumerFinalizerPrefix + "statefulset-aaaa"},
		{"consumer finalizer, trailing dot trimmed", ConsumerFinalizer(v1.KindGroup, "", "g"+strings.Repeat(".", 60)), ConsumerFinalizerPrefix + "group-g-"},
		{"deprovision finalizer", DeprovisionFinalizer, "rekey.io/deprovision"},
	}
	for _, c := range cases {
		if errs := validation.IsQualifiedName(c.got); len(errs) > 0 {
			t.Errorf("%s: %q is not a qualified name: %v", c.name, c.got, errs)
		}
		if !strings.HasPrefix(c.got, c.wantPref) {
			t.Errorf("%s: %q does not start with %q", c.name, c.got, c.wantPref)
		}
	}
	if RestartAnnotation(set("a", "b-"+long)) == RestartAnnotation(set("a", "b-"+long+"x")) {
		t.Error("two sets whose names share the truncated part got one restart annotation")
	}
	if ConsumerFinalizer(v1.KindDeployment, "a", "api") == ConsumerFinalizer(v1.KindDeployment, "b", "api") {
		t.Error("consumers in two namespaces got one finalizer")
	}
}

func TestGenerationAndSecretNames(t *testing.T) {
	cases := []struct{ name, got, want string }{
		{"source Secret", SourceSecretName(set("shop", "orders")), "rekey.shop.orders"},
		{"rotator Secret", RotatorSecretName("rook-ceph-admin-keyring"), "rook-ceph-admin-keyring-rotator"},
		{"ceph generation 0 is the entity itself", CephGenerationEntity("client.csi", 0), "client.csi"},
		{"ceph generation 3", CephGenerationEntity("client.csi", 3), "client.csi.3"},
		{"rabbitmq generation 12", RabbitMQUser("nova", 12), "nova-g12"},
		{"ceph rendered keys", strings.Join([]string{CephKeyringKey("client.a"), CephKeyKey("client.a"), CephNameKey("client.a"), CephIDKey("client.a")}, " "),
			"client.a.keyring client.a.key client.a.name client.a.id"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestCephCSIEntity(t *testing.T) {
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
		got, err := CephCSIEntity(c.cs, c.t)
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

func set(ns, name string) *v1.CredentialSet {
	return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}
