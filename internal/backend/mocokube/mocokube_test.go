package mocokube

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/moco"
	"rekey.io/rekey/internal/reason"
)

// kube is registry.Kube over controller-runtime's fake client, recording
// the Secrets updated, in order. The methods mocokube never calls are left
// to the nil embedded interface: a call fails the test with a panic.
type kube struct {
	registry.Kube
	c       client.Client
	ns      string
	updates []string
}

func (k *kube) Get(ctx context.Context, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	return k.c.Get(ctx, key, o, opts...)
}

func (k *kube) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	return k.c.List(ctx, l, opts...)
}

func (k *kube) StatefulSet(ctx context.Context, name string) (*appsv1.StatefulSet, error) {
	s := &appsv1.StatefulSet{}
	return s, k.c.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: name}, s)
}

func (k *kube) Update(ctx context.Context, s *corev1.Secret) error {
	k.updates = append(k.updates, s.Namespace+"/"+s.Name)
	return k.c.Update(ctx, s)
}

const (
	ns, cluster, system = "shop", "shop", "moco-system"
	clusterUID          = "mc-uid"
)

var names = moco.NamesOf(ns, cluster)

// fixture is MOCO's objects for MySQLCluster shop/shop, with the
// passwords old-<KEY>, healthy; edit changes them (the MySQLCluster, its
// CRD, MOCO's controller, user and my.cnf Secrets, in this order) before
// the client holds them.
func fixture(t *testing.T, edit func(objs []client.Object) []client.Object) *kube {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mc := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Healthy", "status": "True", "reason": "Healthy", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			map[string]any{"type": "Available", "status": "True", "reason": "Available", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		}}}}
	mc.SetAPIVersion(moco.APIVersion)
	mc.SetKind(moco.Kind)
	mc.SetNamespace(ns)
	mc.SetName(cluster)
	mc.SetUID(clusterUID)
	crd := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"versions": []any{
		map[string]any{"name": "v1beta2", "schema": map[string]any{"openAPIV3Schema": map[string]any{"properties": map[string]any{
			"status": map[string]any{"properties": map[string]any{"conditions": map[string]any{}}}}}}}}}}}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(moco.CRDName)
	old := map[string]string{}
	for _, k := range moco.Keys {
		old[k.Key] = "old-" + k.Key
	}
	owned := []metav1.OwnerReference{{APIVersion: moco.APIVersion, Kind: moco.Kind, Name: cluster, UID: clusterUID, Controller: ptr.To(true)}}
	objs := []client.Object{mc, crd,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: names.ControllerSecret,
			Labels:      map[string]string{moco.LabelCreatedBy: moco.CreatedBy, moco.LabelInstance: cluster, moco.LabelInstanceNamespace: ns},
			Annotations: map[string]string{moco.SecretVersionAnnotation: moco.SecretVersion}},
			Data: moco.UserSecretData(old)},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.UserSecret, OwnerReferences: owned}, Data: moco.UserSecretData(old)},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.MyCnfSecret, OwnerReferences: owned}, Data: moco.MyCnfData(old)},
	}
	if edit != nil {
		objs = edit(objs)
	}
	return &kube{c: fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(), ns: ns}
}

func set(uid string) *v1.CredentialSet {
	return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco", UID: types.UID("set-" + uid)},
		Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{MOCO: &v1.MOCOSpec{ClusterName: cluster}}}}
}

func refusedFor(t *testing.T, err error, why reason.Reason) {
	t.Helper()
	r, ok := engine.AsRefusal(err)
	if !ok || r.Reason != string(why) {
		t.Fatalf("want a %s refusal, got %v", why, err)
	}
}

// TestWriteOrderAndClaim: the passwords MOCO holds are adopted; new ones
// go to MOCO's controller Secret first (claimed for the set), then to the
// two Secrets MOCO copies from it, in MOCO's forms; written, they are no
// longer stale.
func TestWriteOrderAndClaim(t *testing.T) {
	k := fixture(t, nil)
	ctx := context.Background()
	c, err := Resolve(ctx, set("1"), k, system)
	if err != nil {
		t.Fatal(err)
	}
	if c.Current["ADMIN_PASSWORD"] != "old-ADMIN_PASSWORD" || len(c.Current) != 8 {
		t.Fatalf("adopted %d passwords, admin's %q", len(c.Current), c.Current["ADMIN_PASSWORD"])
	}
	if sts := c.Spec.Instances.StatefulSet; sts == nil || sts.Name != names.StatefulSet || c.Spec.Admin.User != moco.AdminUser {
		t.Fatalf("derived spec %+v", c.Spec)
	}
	next := engine.Secrets{}
	for _, key := range moco.Keys {
		next[key.Key] = "new-" + key.Key
	}
	if stale, err := c.Stale(ctx, next); err != nil || !stale {
		t.Fatalf("stale = %v, %v before the write", stale, err)
	}
	if err := c.Write(ctx, next); err != nil {
		t.Fatal(err)
	}
	want := []string{system + "/" + names.ControllerSecret, ns + "/" + names.UserSecret, ns + "/" + names.MyCnfSecret}
	if strings.Join(k.updates, " ") != strings.Join(want, " ") {
		t.Errorf("updated %v, want %v in this order", k.updates, want)
	}
	read := func(namespace, name string) *corev1.Secret {
		s := &corev1.Secret{}
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctl := read(system, names.ControllerSecret)
	if string(ctl.Data["AGENT_PASSWORD"]) != "new-AGENT_PASSWORD" || ctl.Annotations[ClaimAnnotation] != "set-1" {
		t.Errorf("controller Secret: agent %q, claim %q", ctl.Data["AGENT_PASSWORD"], ctl.Annotations[ClaimAnnotation])
	}
	if got := string(read(ns, names.UserSecret).Data["BACKUP_PASSWORD"]); got != "new-BACKUP_PASSWORD" {
		t.Errorf("user Secret's BACKUP_PASSWORD = %q", got)
	}
	if got := string(read(ns, names.MyCnfSecret).Data["moco-readonly-my.cnf"]); !strings.Contains(got, `password="new-READONLY_PASSWORD"`) {
		t.Errorf("moco-readonly-my.cnf = %q", got)
	}
	if stale, err := c.Stale(ctx, next); err != nil || stale {
		t.Errorf("stale = %v, %v after the write", stale, err)
	}
	// Another set now finds the cluster claimed.
	_, err = Resolve(ctx, set("2"), k, system)
	refusedFor(t, err, reason.NotOwned)
}
