package manifests

// A fresh API server to install rendered manifests into, object by object,
// and to ask what the live authorizer allows the manager.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// installOrder ranks kinds so that everything an object refers to exists
// before it: namespaces, then the CRD, then identities, roles, bindings,
// workloads, and custom resources last.
func installOrder(u *unstructured.Unstructured) int {
	switch u.GetKind() {
	case "Namespace":
		return 0
	case "CustomResourceDefinition":
		return 1
	case "ServiceAccount":
		return 2
	case "ClusterRole", "Role":
		return 3
	case "ClusterRoleBinding", "RoleBinding":
		return 4
	case "Secret", "ConfigMap":
		return 5
	case "Service":
		return 6
	case "Deployment":
		return 7
	}
	if u.GroupVersionKind().Group == v1.GroupVersion.Group {
		return 9
	}
	return 8
}

// warnings collects the API server's warnings (PodSecurity, deprecations).
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// cluster is a fresh API server with clients that record warnings.
type cluster struct {
	cp    *testenv.ControlPlane
	c     client.Client
	cfg   *rest.Config
	warns *warnings
}

var installScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1.AddToScheme(s))
	return s
}()

func newCluster(t *testing.T) *cluster {
	t.Helper()
	// No CRDDirectoryPaths: the manifests under test install the CRD.
	return clusterOn(t, testenv.APIServerForTest(t, testenv.ControlPlaneOptions{}))
}

// clusterOn wraps a started control plane.
func clusterOn(t *testing.T, cp *testenv.ControlPlane) *cluster {
	t.Helper()
	k := &cluster{cp: cp, warns: &warnings{}}
	k.cfg = rest.CopyConfig(cp.Config)
	k.cfg.WarningHandlerWithContext = k.warns
	k.newClient(t)
	return k
}

// newClient (re)builds the client, so that its REST mapping sees API
// groups installed since.
func (k *cluster) newClient(t *testing.T) {
	t.Helper()
	c, err := client.New(k.cfg, client.Options{Scheme: installScheme})
	if err != nil {
		t.Fatal(err)
	}
	k.c = c
}

// install creates objs in dependency order (after namespaces named in
// precreate, as `helm install --create-namespace` would), waiting for each
// CRD to be established, and fails on any error or server warning.
func (k *cluster) install(t *testing.T, what string, objs []*unstructured.Unstructured, precreate ...string) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range precreate {
		// The same Pod Security level the kustomize namespace enforces, so
		// that both renderings' pod templates are checked against it.
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
		if err := k.c.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	sorted := append([]*unstructured.Unstructured(nil), objs...)
	sort.SliceStable(sorted, func(i, j int) bool { return installOrder(sorted[i]) < installOrder(sorted[j]) })
	crds := 0
	for _, o := range sorted {
		if installOrder(o) > 1 && crds > 0 {
			k.newClient(t)
			crds = 0
		}
		obj := o.DeepCopy()
		if err := k.c.Create(ctx, obj); err != nil {
			t.Fatalf("%s: create %s: %v", what, describe(o), err)
		}
		for _, w := range k.warns.take() {
			t.Errorf("%s: creating %s: the API server warns: %s", what, describe(o), w)
		}
		if o.GetKind() == "CustomResourceDefinition" {
			k.waitEstablished(t, o.GetName())
			crds++
		}
	}
	t.Logf("%s: created %d objects", what, len(sorted))
}

func (k *cluster) waitEstablished(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := k.c.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		status := map[string]string{}
		for _, c := range conds {
			m, _ := c.(map[string]any)
			typ, _ := m["type"].(string)
			st, _ := m["status"].(string)
			status[typ] = st
		}
		if status["Established"] == "True" && status["NamesAccepted"] == "True" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s not Established within 30s: conditions %v", name, conds)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkPresent reads every object back, and checks the references between
// them: bindings to existing roles and ServiceAccounts, the Deployment to
// its ServiceAccount.
func (k *cluster) checkPresent(t *testing.T, what string, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	exists := func(apiVersion, kind, ns, name string) bool {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		err := k.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("%s: get %s %s/%s: %v", what, kind, ns, name, err)
		}
		return err == nil
	}
	for _, o := range objs {
		if !exists(o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()) {
			t.Errorf("%s: %s is missing after install", what, describe(o))
			continue
		}
		switch o.GetKind() {
		case "RoleBinding", "ClusterRoleBinding":
			ref, _, _ := unstructured.NestedStringMap(o.Object, "roleRef")
			ns := o.GetNamespace()
			if ref["kind"] == "ClusterRole" {
				ns = ""
			}
			if !exists("rbac.authorization.k8s.io/v1", ref["kind"], ns, ref["name"]) {
				t.Errorf("%s: %s refers to %s %s, which does not exist", what, describe(o), ref["kind"], ref["name"])
			}
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				m, _ := s.(map[string]any)
				if m["kind"] == "ServiceAccount" && !exists("v1", "ServiceAccount", fmt.Sprint(m["namespace"]), fmt.Sprint(m["name"])) {
					t.Errorf("%s: %s binds ServiceAccount %v/%v, which does not exist", what, describe(o), m["namespace"], m["name"])
				}
			}
		case "Deployment":
			sa, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			if sa == "" || !exists("v1", "ServiceAccount", o.GetNamespace(), sa) {
				t.Errorf("%s: %s runs as ServiceAccount %q, which does not exist", what, describe(o), sa)
			}
		}
	}
}

// managerIdentity is the namespace and ServiceAccount of the manager's
// Deployment.
func managerIdentity(t *testing.T, objs []*unstructured.Unstructured) (ns, sa string) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			sa, _, _ = unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			return o.GetNamespace(), sa
		}
	}
	t.Fatal("no Deployment")
	return "", ""
}

// can asks the live authorizer whether the ServiceAccount may do g.
func (k *cluster) can(t *testing.T, ns, sa string, g grant) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: g.namespace, Group: g.group, Verb: g.verb,
			Resource: strings.Split(g.resource, "/")[0], Subresource: subresource(g.resource),
		},
	}}
	if err := k.c.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

func subresource(r string) string {
	if _, sub, ok := strings.Cut(r, "/"); ok {
		return sub
	}
	return ""
}

// checkAuthorized: the manager may do everything it needs, and nothing of
// what it must not (list, watch or delete Secrets; Secrets outside the
// namespaces it was given).
func (k *cluster) checkAuthorized(t *testing.T, what, ns, sa string, need map[grant]bool, denied []grant) {
	t.Helper()
	var gs []grant
	for g := range need {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].String() < gs[j].String() })
	for _, g := range gs {
		if !k.can(t, ns, sa, g) {
			t.Errorf("%s: the API server denies ServiceAccount %s/%s %s, which the manager needs", what, ns, sa, g)
		}
	}
	for _, g := range denied {
		if k.can(t, ns, sa, g) {
			t.Errorf("%s: the API server allows ServiceAccount %s/%s %s", what, ns, sa, g)
		}
	}
}
