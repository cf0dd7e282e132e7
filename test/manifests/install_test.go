package manifests

// Installing the manifests for real: the pinned kustomize and helm render
// them, and each rendering is created object by object in a fresh
// kube-apiserver (no CRD pre-installed: the manifests bring it). Then the
// CRD must serve the samples and the manager's ServiceAccount must be
// allowed exactly what the manager needs, as the live RBAC authorizer sees
// it.

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// pinnedTool returns a pinned tool's path after checking the binary was
// built from the module version versions.env pins. A missing tool fails the
// test (testenv names `make env`); it never skips.
func pinnedTool(t *testing.T, env *testenv.Env, name, module, versionKey string) string {
	t.Helper()
	path, err := env.Tool(name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v: run `make env`", path, err)
	}
	got := ""
	if info.Main.Path == module {
		got = info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == module {
			got = d.Version
		}
	}
	if want := env.Versions[versionKey]; got != want {
		t.Fatalf("%s is built from %s %q, versions.env pins %s: run `make env`", path, module, got, want)
	}
	return path
}

// runTool runs a tool in the repository root with an empty HOME and Helm
// directories of its own, and returns its stdout.
func runTool(t *testing.T, env *testenv.Env, tool string, args ...string) []byte {
	t.Helper()
	start := time.Now()
	stdout, stderr, err := tryTool(t, env, tool, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(tool), strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("%s %s: %d bytes in %s", filepath.Base(tool), strings.Join(args, " "), stdout.Len(), time.Since(start).Round(time.Millisecond))
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Errorf("%s %s wrote to stderr:\n%s", filepath.Base(tool), strings.Join(args, " "), s)
	}
	return stdout.Bytes()
}

// tryTool runs a tool as runTool does, and returns its outputs and error
// for the caller to judge.
func tryTool(t *testing.T, env *testenv.Env, tool string, args ...string) (stdout, stderr *bytes.Buffer, err error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(tool, args...)
	cmd.Dir = env.RepoRoot
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data")}
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return stdout, stderr, cmd.Run()
}

// unstructuredObjects decodes a multi-document YAML stream, skipping empty
// documents (Helm leaves some).
func unstructuredObjects(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, doc)
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, doc)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no objects", what)
	}
	return out
}

func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", u.GetKind(), ns, u.GetName())
	}
	return u.GetKind() + " " + u.GetName()
}

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
	cp := testenv.APIServerForTest(t, testenv.ControlPlaneOptions{})
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

// checkCRDServes: discovery serves rekey.io/v1alpha1 credentialsets with
// its status subresource, the samples are created (after their
// namespaces), defaults are applied, status is written through the
// subresource, and an invalid set is refused with the field to fix.
func (k *cluster) checkCRDServes(t *testing.T, env *testenv.Env, kustomize string) {
	t.Helper()
	ctx := context.Background()
	dc, err := discovery.NewDiscoveryClientForConfig(k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	rl, err := dc.ServerResourcesForGroupVersion(v1.GroupVersion.String())
	if err != nil {
		t.Fatalf("discovery of %s: %v", v1.GroupVersion, err)
	}
	served := map[string]string{}
	for _, r := range rl.APIResources {
		served[r.Name] = r.Kind
	}
	if served["credentialsets"] != "CredentialSet" || served["credentialsets/status"] == "" {
		t.Fatalf("%s serves %v, want credentialsets (CredentialSet) and credentialsets/status", v1.GroupVersion, served)
	}
	k.newClient(t)

	samples := unstructuredObjects(t, "config/samples", runTool(t, env, kustomize, "build", "config/samples"))
	var namespaces []string
	sets := 0
	for _, s := range samples {
		if ns := s.GetNamespace(); ns != "" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
		if s.GetKind() == "CredentialSet" {
			sets++
		}
	}
	if sets < 2 {
		t.Fatalf("config/samples holds %d CredentialSets, want the moco and application-user samples", sets)
	}
	k.install(t, "config/samples", samples, namespaces...)
	k.checkPresent(t, "config/samples", samples)

	for _, s := range samples {
		if s.GetKind() != "CredentialSet" {
			continue
		}
		cs := &v1.CredentialSet{}
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: s.GetNamespace(), Name: s.GetName()}, cs); err != nil {
			t.Fatalf("read sample %s back as %s: %v", describe(s), v1.GroupVersion, err)
		}
		m := cs.Spec.MySQL
		switch {
		case m == nil:
			t.Errorf("sample %s: spec.mysql lost", describe(s))
		case m.Instances.StatefulSet != nil && m.Instances.StatefulSet.Port != 3306:
			t.Errorf("sample %s: statefulSet.port defaulted to %d, want 3306", describe(s), m.Instances.StatefulSet.Port)
		case m.TLS != "Required" || m.TLSCASecretRef == nil:
			// Connections that carry credentials verify TLS by default,
			// and the samples show where the CA goes.
			t.Errorf("sample %s: tls %q with CA %v, want verified TLS (Required, defaulted) with tlsCASecretRef", describe(s), m.TLS, m.TLSCASecretRef)
		}
		if m != nil {
			for _, u := range m.Users {
				if u.Host != "%" {
					t.Errorf("sample %s: user %s host defaulted to %q, want %%", describe(s), u.Name, u.Host)
				}
			}
		}
		// The operator's first write: status through the subresource.
		now := metav1.Now()
		cs.Status = v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 1, CurrentSince: &now}
		if err := k.c.Status().Update(ctx, cs); err != nil {
			t.Errorf("sample %s: status update: %v", describe(s), err)
		}
	}

	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": "CredentialSet",
		"metadata": map[string]any{"name": "no-backend", "namespace": namespaces[0]},
		"spec":     map[string]any{},
	}}
	err = k.c.Create(ctx, bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "set exactly one backend block: spec.mysql") {
		t.Errorf("a CredentialSet without a backend: %v, want Invalid naming spec.mysql", err)
	}
}

// secretDenials are what the manager must never be allowed, in ns and
// cluster-wide. (list and watch feed only the label-selected informer of
// the Secrets rekey wrote; they come with get wherever it is granted.)
func secretDenials(namespaces ...string) []grant {
	var out []grant
	for _, ns := range append(namespaces, "") {
		for _, v := range []string{"delete", "deletecollection", "patch"} {
			out = append(out, grant{ns, "", "secrets", v})
		}
	}
	return append(out, grant{"", "rekey.io", "credentialsets", "delete"}, grant{"", "", "pods", "delete"})
}

func TestInstallKustomizeDefault(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	kustomize := pinnedTool(t, env, "kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "KUSTOMIZE_VERSION")
	objs := unstructuredObjects(t, "kustomize build config/default", runTool(t, env, kustomize, "build", "config/default"))
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	if kinds["Namespace"] != 1 || kinds["CustomResourceDefinition"] != 1 || kinds["Deployment"] != 1 {
		t.Fatalf("config/default renders %v, want one Namespace, CRD and Deployment", kinds)
	}
	checkManagerPod(t, "config/default", objs)

	k := newCluster(t)
	k.install(t, "config/default", objs)
	k.checkPresent(t, "config/default", objs)
	ns, sa := managerIdentity(t, objs)
	if ns != operatorNamespace {
		t.Errorf("the manager runs in %s, want %s", ns, operatorNamespace)
	}
	k.checkAuthorized(t, "config/default", ns, sa, needed(ns, []string{""}, true), secretDenials(ns, "shop"))
	k.checkCRDServes(t, env, kustomize)
	k.checkNamespacePolicy(t, "config/default", ns)
}

func TestInstallHelmChart(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	kustomize := pinnedTool(t, env, "kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "KUSTOMIZE_VERSION")
	base := []string{"template", "rekey", chartDir, "--namespace", operatorNamespace}

	// helm template leaves crds/ out unless asked; helm install applies it.
	plain := unstructuredObjects(t, "helm template", runTool(t, env, helm, base...))
	for _, o := range plain {
		if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "Namespace" {
			t.Errorf("helm template renders %s from templates/: the CRD belongs in crds/, the namespace to helm --create-namespace", describe(o))
		}
	}

	cases := []struct {
		name string
		set  []string
		// Namespaces the release needs to exist: the release namespace
		// (helm install --create-namespace) and secretNamespaces.
		precreate []string
		secretNS  []string // where the manager may use Secrets besides its own namespace; "" = everywhere
		denied    []grant
		watch     []string // namespaced mode
	}{
		{"defaults", nil, []string{operatorNamespace}, []string{""}, secretDenials(operatorNamespace, "apps"), nil},
		{"narrowed", []string{"--set", "rbac.clusterWideSecrets=false", "--set", "rbac.secretNamespaces={apps}"},
			[]string{operatorNamespace, "apps"}, []string{"apps"},
			append(secretDenials(operatorNamespace, "apps"),
				grant{"orders", "", "secrets", "get"}, grant{"orders", "", "secrets", "create"}, grant{"", "", "secrets", "get"},
				grant{"", "", "secrets", "list"}, grant{"", "", "secrets", "watch"}), nil},
		{"namespaced", []string{"--set", "watchNamespaces={apps}"},
			[]string{operatorNamespace, "apps"}, []string{"apps"},
			append(secretDenials(operatorNamespace, "apps"),
				grant{"orders", "", "secrets", "get"}, grant{"orders", "rekey.io", "credentialsets", "list"},
				grant{"", "rekey.io", "credentialsets", "watch"}, grant{"orders", "apps", "deployments", "patch"}), []string{"apps"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := append(append(append([]string{}, base...), "--include-crds"), c.set...)
			what := "helm " + strings.Join(args, " ")
			objs := unstructuredObjects(t, what, runTool(t, env, helm, args...))
			if len(objs) != len(plain)+1 && c.set == nil {
				t.Errorf("--include-crds adds %d objects, want the CRD alone", len(objs)-len(plain))
			}
			checkManagerPod(t, what, objs)
			// The Secret informer lists only where the Roles grant it.
			wantArg := ""
			if c.name == "narrowed" {
				wantArg = "--secret-namespaces=" + operatorNamespace + ",apps"
			}
			var gotArg string
			for _, a := range managerArgs(objs) {
				if strings.HasPrefix(a, "--secret-namespaces") {
					gotArg = a
				}
			}
			if gotArg != wantArg {
				t.Errorf("%s: manager argument %q, want %q", what, gotArg, wantArg)
			}
			k := newCluster(t)
			k.install(t, what, objs, c.precreate...)
			k.checkPresent(t, what, objs)
			ns, sa := managerIdentity(t, objs)
			k.checkAuthorized(t, what, ns, sa, needed(ns, c.secretNS, true, c.watch...), c.denied)
			k.checkCRDServes(t, env, kustomize)
			k.checkNamespacePolicy(t, what, ns)
		})
	}
}

// checkNamespacePolicy: the shipped admission policy, live in the API
// server, refuses a namespace-only user's CredentialSet that names another
// namespace or the operator's, and admits one that stays home.
func (k *cluster) checkNamespacePolicy(t *testing.T, what, operatorNS string) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{"tenant", "victim"} {
		if err := k.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tenant"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"rekey.io"}, Resources: []string{"credentialsets"}, Verbs: []string{"create", "get", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "get", "update"}},
	}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tenant"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "tenant"}}}
	for _, o := range []client.Object{role, rb} {
		if err := k.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(k.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant"}
	tenant, err := client.New(cfg, client.Options{Scheme: installScheme})
	if err != nil {
		t.Fatal(err)
	}
	set := func(name, targetNS string) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name}, Spec: v1.CredentialSetSpec{
			RabbitMQ: &v1.RabbitMQSpec{Endpoint: "https://rabbitmq.tenant.svc:15671",
				Admin: v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "admin"}}, User: v1.RabbitMQUser{Base: name}},
			Distribution: []v1.SecretTarget{{Namespace: targetNS, Name: name}},
		}}
	}
	// The policy is loaded asynchronously after it is created.
	deadline := time.Now().Add(time.Minute)
	for {
		err := tenant.Create(ctx, set("foreign", "victim"))
		if err != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), "spec.distribution: tenant may not create and update Secrets in all of victim/foreign") {
			break
		}
		if err == nil {
			_ = k.c.Delete(ctx, set("foreign", "victim"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: a tenant's CredentialSet distributing into another namespace: %v; want the admission policy's refusal", what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Even a cluster admin may not target the operator's namespace.
	err = k.c.Create(ctx, set("plant", operatorNS))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "namespace "+operatorNS+" is the operator's own") {
		t.Errorf("%s: a CredentialSet distributing into %s: %v; want the admission policy's refusal", what, operatorNS, err)
	}
	if err := tenant.Create(ctx, set("home", "tenant")); err != nil {
		t.Errorf("%s: a tenant's CredentialSet distributing into its own namespace: %v", what, err)
	}
}

// TestUserRolesAggregate: with the kube-controller-manager aggregating
// ClusterRoles (a full control plane), the built-in edit, admin and view
// roles gain exactly rekey's rights on CredentialSets once config/default is
// installed, as the live authorizer sees them.
func TestUserRolesAggregate(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	kustomize := pinnedTool(t, env, "kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "KUSTOMIZE_VERSION")
	objs := unstructuredObjects(t, "kustomize build config/default", runTool(t, env, kustomize, "build", "config/default"))
	cp := testenv.FullControlPlaneForTest(t, testenv.ControlPlaneOptions{})
	k := &cluster{cp: cp, warns: &warnings{}}
	k.cfg = rest.CopyConfig(cp.Config)
	k.cfg.WarningHandlerWithContext = k.warns
	k.newClient(t)
	k.install(t, "config/default", objs)
	ctx := context.Background()
	if err := k.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"edit", "admin", "view"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: r},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "team-" + r}}}
		if err := k.c.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	userCan := func(user, verb, resource string) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team", Group: "rekey.io", Verb: verb,
				Resource: strings.Split(resource, "/")[0], Subresource: subresource(resource)},
		}}
		if err := k.c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	// The aggregation controller fills the built-in roles asynchronously.
	deadline := time.Now().Add(time.Minute)
	for !userCan("team-edit", "create", "credentialsets") || !userCan("team-view", "list", "credentialsets") {
		if time.Now().After(deadline) {
			t.Fatal("edit/view never gained CredentialSets: rekey-edit/rekey-view were not aggregated")
		}
		time.Sleep(500 * time.Millisecond)
	}
	cases := []struct {
		user, verb, resource string
		want                 bool
	}{
		{"team-edit", "create", "credentialsets", true},
		{"team-edit", "delete", "credentialsets", true},
		{"team-edit", "get", "credentialsets/status", true},
		{"team-edit", "update", "credentialsets/status", false},
		{"team-admin", "update", "credentialsets", true},
		{"team-view", "list", "credentialsets", true},
		{"team-view", "get", "credentialsets/status", true},
		{"team-view", "create", "credentialsets", false},
		{"team-view", "patch", "credentialsets", false},
		{"nobody", "get", "credentialsets", false},
	}
	for _, c := range cases {
		if got := userCan(c.user, c.verb, c.resource); got != c.want {
			t.Errorf("%s %s %s in team: allowed=%v, want %v", c.user, c.verb, c.resource, got, c.want)
		}
	}
}

// TestInstallKustomizeNamespaced: the namespaced-mode overlay gives the
// manager exactly what it needs in the watched namespace and the operator's
// namespace, nothing on CredentialSets, workloads or Secrets elsewhere, and
// tells the manager which namespaces to watch.
func TestInstallKustomizeNamespaced(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	kustomize := pinnedTool(t, env, "kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "KUSTOMIZE_VERSION")
	objs := unstructuredObjects(t, "kustomize build config/namespaced", runTool(t, env, kustomize, "build", "config/namespaced"))
	if !slices.Contains(managerArgs(objs), "--watch-namespaces=apps") {
		t.Error("config/namespaced: the manager is not given --watch-namespaces=apps")
	}
	k := newCluster(t)
	k.install(t, "config/namespaced", objs, "apps")
	k.checkPresent(t, "config/namespaced", objs)
	ns, sa := managerIdentity(t, objs)
	denied := append(secretDenials(ns, "apps"),
		grant{"", "", "secrets", "get"}, grant{"orders", "", "secrets", "create"},
		grant{"", "rekey.io", "credentialsets", "list"}, grant{"orders", "rekey.io", "credentialsets", "watch"},
		grant{"orders", "apps", "deployments", "patch"}, grant{"", "apps", "statefulsets", "list"})
	k.checkAuthorized(t, "config/namespaced", ns, sa, needed(ns, []string{"apps"}, true, "apps"), denied)
	k.checkNamespacePolicy(t, "config/namespaced", ns)
}

// managerArgs lists the manager container's arguments.
func managerArgs(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			args, _ := c.(map[string]any)["args"].([]any)
			for _, a := range args {
				if s, ok := a.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// checkManagerPod: the manager's pod can run the Ceph backend as shipped —
// its ceph work dir is a memory-backed emptyDir (the root filesystem is
// read-only, and keyrings never reach a node's disk), it runs as the
// image's numeric user (runAsNonRoot needs one), and a stopping manager
// gets longer than one ceph command (40 s) to finish its step.
func checkManagerPod(t *testing.T, what string, objs []*unstructured.Unstructured) {
	t.Helper()
	var workDir string
	for _, a := range managerArgs(objs) {
		if v, ok := strings.CutPrefix(a, "--ceph-work-dir="); ok {
			workDir = v
		}
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		if g, _, _ := unstructured.NestedInt64(spec, "terminationGracePeriodSeconds"); g <= 40 {
			t.Errorf("%s: terminationGracePeriodSeconds %d, want more than a ceph command's 40 s", what, g)
		}
		if u, _, _ := unstructured.NestedInt64(spec, "securityContext", "runAsUser"); u == 0 {
			t.Errorf("%s: no numeric non-root runAsUser", what)
		}
		memory := map[string]bool{}
		vols, _, _ := unstructured.NestedSlice(spec, "volumes")
		for _, v := range vols {
			if m, _, _ := unstructured.NestedString(v.(map[string]any), "emptyDir", "medium"); m == "Memory" {
				memory[v.(map[string]any)["name"].(string)] = true
			}
		}
		mounted := false
		containers, _, _ := unstructured.NestedSlice(spec, "containers")
		for _, c := range containers {
			mounts, _, _ := unstructured.NestedSlice(c.(map[string]any), "volumeMounts")
			for _, m := range mounts {
				mm := m.(map[string]any)
				mounted = mounted || workDir != "" && mm["mountPath"] == workDir && memory[mm["name"].(string)]
			}
		}
		if !mounted {
			t.Errorf("%s: --ceph-work-dir %q is not a mounted memory-backed emptyDir", what, workDir)
		}
	}
}
