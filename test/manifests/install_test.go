package manifests

// Installing the manifests for real: the pinned kustomize and helm render
// them, and each rendering is created object by object in a fresh
// kube-apiserver (no CRD pre-installed: the manifests bring it). Then the
// CRD must serve the samples and the manager's ServiceAccount must be
// allowed exactly what the manager needs, as the live RBAC authorizer sees
// it.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// checkCRDServes: discovery serves rekey.io/v1alpha1 credentialsets with
// its status subresource, the samples are created (after their
// namespaces), defaults are applied, status is written through the
// subresource, and an invalid set is refused with the field to fix.
func (k *cluster) checkCRDServes(t *testing.T, env *testenv.Env, kustomize, managerNS, managerSA string) {
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
		// The operator's first write: status through the subresource, by
		// the manager's ServiceAccount alone (the status policy refuses
		// it to anyone else, a cluster admin too). RBAC is not what is
		// tested here: the impersonated manager keeps the admin's group.
		now := metav1.Now()
		cs.Status = v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 1, CurrentSince: &now}
		// A dry run: while the policy is not yet in force the admin's write
		// would otherwise land and leave the retries a stale version.
		deadline := time.Now().Add(time.Minute)
		for {
			err := k.c.Status().Update(ctx, cs.DeepCopy(), client.DryRunAll)
			if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "only rekey (system:serviceaccount:"+managerNS+":"+managerSA+") writes") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sample %s: a status write by the admin: %v; want the status policy's refusal", describe(s), err)
			}
			time.Sleep(250 * time.Millisecond)
		}
		cfg := rest.CopyConfig(k.cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + managerNS + ":" + managerSA,
			Groups: []string{"system:masters", "system:serviceaccounts", "system:authenticated"}}
		manager, err := client.New(cfg, client.Options{Scheme: installScheme})
		if err != nil {
			t.Fatal(err)
		}
		if err := manager.Status().Update(ctx, cs); err != nil {
			t.Errorf("sample %s: status update by the manager: %v", describe(s), err)
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
	k.checkCRDServes(t, env, kustomize, ns, sa)
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
			k.checkCRDServes(t, env, kustomize, ns, sa)
			k.checkNamespacePolicy(t, what, ns)
		})
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
