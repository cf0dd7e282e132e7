package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/fake"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
)

// rig runs the real reconciler on controller-runtime's fake client and a
// fake backend: every engine action in milliseconds, with no server.
type rig struct {
	t     *testing.T
	kc    client.Client
	r     *Reconciler
	ev    *eventLog
	store *fake.Store
	key   client.ObjectKey
}

const fastNamespace = "rekey-system"

// newRig makes a set in namespace app served to Secret app/db-creds; with
// a consumer, Deployment app/web uses it and never finishes a rollout.
func newRig(t *testing.T, traits engine.Traits, consumer bool) *rig {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	name := strings.ReplaceAll(t.Name(), "/", "-")
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db", UID: "uid-1",
			Annotations: map[string]string{fake.Annotation: name}},
		Spec: v1.CredentialSetSpec{
			Distribution: []v1.SecretTarget{{Namespace: "app", Name: "db-creds"}},
			Rotation:     v1.RotationSpec{DiscardPolicy: v1.DiscardManual},
		},
	}
	objs := []client.Object{cs}
	if consumer {
		cs.Spec.Consumers = []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "web"}}
		one := int32(1)
		objs = append(objs, &appsv1.Deployment{ObjectMeta: metaOf("app", "web"), Spec: appsv1.DeploymentSpec{Replicas: &one}})
	}
	kc := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1.CredentialSet{}, &appsv1.Deployment{}).Build()
	ev := &eventLog{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Reconciler{Client: kc, APIReader: kc, Recorder: ev, Namespace: fastNamespace,
		Now: func() time.Time { return now }}
	return &rig{t: t, kc: kc, r: r, ev: ev, store: fake.New(name, traits), key: client.ObjectKeyFromObject(cs)}
}

// reconcile runs one reconcile; its error is returned, not fatal, as a
// backend failure is one of the outcomes under test.
func (g *rig) reconcile() error {
	_, err := g.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: g.key})
	return err
}

// settle reconciles until a reconcile changes nothing of the status (at
// most 10 times), failing on an error.
func (g *rig) settle() {
	g.t.Helper()
	for i := 0; i < 10; i++ {
		before := g.set().Status
		if err := g.reconcile(); err != nil {
			g.t.Fatalf("reconcile: %v", err)
		}
		if statusEqual(before, g.set().Status) {
			return
		}
	}
	g.t.Fatalf("status still changing after 10 reconciles: %+v", g.set().Status)
}

func statusEqual(a, b v1.CredentialSetStatus) bool {
	return a.Phase == b.Phase && a.RotationID == b.RotationID && a.KeyGeneration == b.KeyGeneration &&
		a.RotateApplied == b.RotateApplied && a.DiscardApplied == b.DiscardApplied && a.ResetPending == b.ResetPending
}

func (g *rig) set() *v1.CredentialSet {
	g.t.Helper()
	cs := &v1.CredentialSet{}
	if err := g.kc.Get(context.Background(), g.key, cs); err != nil {
		g.t.Fatal(err)
	}
	return cs
}

func (g *rig) annotate(k, v string) {
	g.t.Helper()
	cs := g.set()
	cs.Annotations[k] = v
	if err := g.kc.Update(context.Background(), cs); err != nil {
		g.t.Fatal(err)
	}
}

// secret is key of Secret ns/name, "" when either is absent.
func (g *rig) secret(ns, name, key string) string {
	s := &corev1.Secret{}
	if err := g.kc.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		return ""
	}
	return string(s.Data[key])
}

// served is what consumers are given.
func (g *rig) served() string { return g.secret("app", "db-creds", fake.Key) }

// stored is the current secret in the source Secret.
func (g *rig) stored() string {
	return g.secret(fastNamespace, naming.SourceSecretName(g.set()), fake.Key)
}

// events are the recorded Events from index from on, "type reason" each.
func (g *rig) events(from int) []string {
	var out []string
	for _, e := range g.ev.got[from:] {
		out = append(out, e[:strings.Index(e, ":")])
	}
	return out
}

func metaOf(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
