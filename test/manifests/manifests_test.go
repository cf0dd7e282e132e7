// Package manifests checks the install manifests without a cluster: the
// kustomize tree in config/, the Helm chart in charts/rekey (rendered with
// Go's text/template, see helm_test.go) and the samples. It proves that the
// RBAC grants exactly what the manager uses — no wildcard, no list or watch
// on Secrets — so a change in either shows up here.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// root is the repository root, seen from this package's directory.
const root = "../.."

const (
	operatorNamespace = "rekey-system"
	crdFile           = "config/crd/bases/rekey.io_credentialsets.yaml"
	chartCRDFile      = "charts/rekey/crds/rekey.io_credentialsets.yaml"
)

// object is one YAML document of a manifest file.
type object struct {
	file string
	raw  []byte
	meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
}

func (o object) String() string {
	return fmt.Sprintf("%s %s/%s (%s)", o.meta.Kind, o.meta.Metadata.Namespace, o.meta.Metadata.Name, o.file)
}

// decode splits a multi-document YAML stream into objects, skipping empty
// documents.
func decode(file string, data []byte) ([]object, error) {
	var out []object
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(probe) == 0 {
			continue
		}
		o := object{file: file, raw: doc}
		if err := yaml.Unmarshal(doc, &o.meta); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, o)
	}
}

func readFile(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func isKustomization(path string) bool {
	switch filepath.Base(path) {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return true
	}
	return false
}

// configFiles lists every YAML file under config/, relative to root.
func configFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(root, "config"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no YAML under config/")
	}
	return files
}

type kustomization struct {
	Namespace string   `json:"namespace"`
	Resources []string `json:"resources"`
	Patches   []struct {
		Path string `json:"path"`
	} `json:"patches"`
}

// kustomizationDir returns the kustomization file of dir, or "".
func kustomizationDir(dir string) string {
	for _, n := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if _, err := os.Stat(filepath.Join(root, dir, n)); err == nil {
			return filepath.ToSlash(filepath.Join(dir, n))
		}
	}
	return ""
}

// build loads what a kustomization includes, following directories, and
// applies its namespace the way kustomize does for the objects used here.
// It does not replace kustomize: only resources and namespace are read.
func build(t *testing.T, dir string) []object {
	t.Helper()
	kf := kustomizationDir(dir)
	if kf == "" {
		t.Fatalf("%s has no kustomization", dir)
	}
	var k kustomization
	if err := yaml.Unmarshal(readFile(t, kf), &k); err != nil {
		t.Fatalf("%s: %v", kf, err)
	}
	var out []object
	for _, r := range k.Resources {
		p := filepath.ToSlash(filepath.Join(dir, r))
		var objs []object
		if st, err := os.Stat(filepath.Join(root, p)); err == nil && st.IsDir() {
			objs = build(t, p)
		} else {
			var err error
			if objs, err = decode(p, readFile(t, p)); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, objs...)
	}
	if k.Namespace == "" {
		return out
	}
	for i, o := range out {
		out[i] = setNamespace(t, o, k.Namespace)
	}
	return out
}

var clusterScoped = map[string]bool{
	"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
}

// setNamespace mirrors kustomize's namespace transformer: namespaced objects,
// the Namespace's own name, and ServiceAccount subjects of bindings.
func setNamespace(t *testing.T, o object, ns string) object {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(o.raw, &m); err != nil {
		t.Fatal(err)
	}
	md, _ := m["metadata"].(map[string]any)
	switch {
	case o.meta.Kind == "Namespace":
		md["name"] = ns
	case !clusterScoped[o.meta.Kind]:
		md["namespace"] = ns
	}
	if subs, ok := m["subjects"].([]any); ok {
		for _, s := range subs {
			if s, ok := s.(map[string]any); ok && s["kind"] == "ServiceAccount" {
				s["namespace"] = ns
			}
		}
	}
	raw, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(o.file, raw)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: re-encoding: %v", o, err)
	}
	return objs[0]
}

// TestConfigParses: every YAML under config/ is valid, and every document
// other than a kustomization names its apiVersion, kind and name.
func TestConfigParses(t *testing.T) {
	for _, f := range configFiles(t) {
		objs, err := decode(f, readFile(t, f))
		if err != nil {
			t.Error(err)
			continue
		}
		if len(objs) == 0 {
			t.Errorf("%s: no document", f)
		}
		if isKustomization(f) {
			continue
		}
		for _, o := range objs {
			if o.meta.APIVersion == "" || o.meta.Kind == "" || o.meta.Metadata.Name == "" {
				t.Errorf("%s: document without apiVersion, kind or metadata.name", f)
			}
		}
	}
}

// TestKustomizations: every resource a kustomization.yaml names exists (a
// directory must hold a kustomization), and every manifest under config/ is
// part of some kustomization, so none is forgotten by kubectl apply -k.
func TestKustomizations(t *testing.T) {
	listed := map[string]bool{}
	for _, f := range configFiles(t) {
		if !isKustomization(f) {
			continue
		}
		var k kustomization
		if err := yaml.Unmarshal(readFile(t, f), &k); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		dir := filepath.Dir(f)
		refs := slices.Clone(k.Resources)
		for _, p := range k.Patches {
			if p.Path != "" {
				refs = append(refs, p.Path)
			}
		}
		if len(refs) == 0 {
			t.Errorf("%s lists no resources", f)
		}
		for _, r := range refs {
			if strings.Contains(r, "://") {
				t.Errorf("%s: remote resource %s: install manifests must be self-contained", f, r)
				continue
			}
			p := filepath.ToSlash(filepath.Join(dir, r))
			st, err := os.Stat(filepath.Join(root, p))
			switch {
			case err != nil:
				t.Errorf("%s: resource %s does not exist", f, r)
			case st.IsDir() && kustomizationDir(p) == "":
				t.Errorf("%s: resource %s is a directory without a kustomization", f, r)
			case !st.IsDir():
				listed[p] = true
			}
		}
	}
	for _, f := range configFiles(t) {
		if !isKustomization(f) && !listed[f] {
			t.Errorf("%s is in no kustomization's resources", f)
		}
	}
}

// TestDefaultInstall: config/default holds everything an install needs, in
// the operator's namespace.
func TestDefaultInstall(t *testing.T) {
	objs := build(t, "config/default")
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.meta.Kind]++
		if !clusterScoped[o.meta.Kind] && o.meta.Metadata.Namespace != operatorNamespace {
			t.Errorf("%s: not in %s", o, operatorNamespace)
		}
	}
	for _, k := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "Deployment", "Service",
		"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		if kinds[k] == 0 {
			t.Errorf("config/default has no %s", k)
		}
	}
	var crd []byte
	for _, o := range objs {
		if o.meta.Kind == "CustomResourceDefinition" {
			crd = o.raw
		}
	}
	if want := readFile(t, crdFile); !bytes.Equal(bytes.TrimSpace(bytes.TrimPrefix(want, []byte("---\n"))), bytes.TrimSpace(crd)) {
		t.Errorf("config/default does not include %s as generated", crdFile)
	}
	checkDeployment(t, objs, "rekey-controller-manager", true)
}

// TestChartCRD: the chart ships the generated CRD unchanged (copy it after
// make generate).
func TestChartCRD(t *testing.T) {
	if !bytes.Equal(readFile(t, crdFile), readFile(t, chartCRDFile)) {
		t.Errorf("%s differs from %s: run cp %s %s", chartCRDFile, crdFile, crdFile, chartCRDFile)
	}
}

// TestSamples: the samples decode strictly into the API types, so a field
// renamed in api/v1alpha1 breaks this test instead of a user's first apply.
func TestSamples(t *testing.T) {
	n := 0
	for _, o := range build(t, "config/samples") {
		if o.meta.Kind != "CredentialSet" {
			continue
		}
		n++
		var cs v1.CredentialSet
		if err := yaml.UnmarshalStrict(o.raw, &cs); err != nil {
			t.Errorf("%s: %v", o, err)
			continue
		}
		if o.meta.APIVersion != v1.GroupVersion.String() {
			t.Errorf("%s: apiVersion %s, want %s", o, o.meta.APIVersion, v1.GroupVersion)
		}
		if cs.Spec.MySQL == nil || (cs.Spec.MySQL.Preset == "" && len(cs.Spec.MySQL.Users) == 0) {
			t.Errorf("%s: needs spec.mysql with a preset or users", o)
		}
	}
	if n < 2 {
		t.Errorf("want the moco and application-user samples, found %d CredentialSets", n)
	}
}

// managerFlags are the flags cmd/manager defines (plus zap's --zap-*).
func managerFlags(t *testing.T) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`flag\.\w+Var\(&\w+, "([^"]+)"`)
	flags := map[string]bool{}
	for _, m := range re.FindAllSubmatch(readFile(t, "cmd/manager/main.go"), -1) {
		flags[string(m[1])] = true
	}
	if len(flags) == 0 {
		t.Fatal("found no flag definitions in cmd/manager/main.go")
	}
	return flags
}

// checkDeployment: the manager's Deployment passes only flags the manager
// defines, runs in the namespace it is deployed to, probes what the
// manager serves, and runs locked down.
func checkDeployment(t *testing.T, objs []object, name string, leaderElect bool) {
	t.Helper()
	var dep *appsv1.Deployment
	for _, o := range objs {
		if o.meta.Kind == "Deployment" && o.meta.Metadata.Name == name {
			dep = &appsv1.Deployment{}
			if err := yaml.UnmarshalStrict(o.raw, dep); err != nil {
				t.Fatalf("%s: %v", o, err)
			}
		}
	}
	if dep == nil {
		t.Fatalf("no Deployment %s", name)
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Deployment %s: want one container", name)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	flags := managerFlags(t)
	args := map[string]string{}
	for _, a := range c.Args {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || (!flags[k] && !strings.HasPrefix(k, "zap-")) {
			t.Errorf("Deployment %s: argument %q is not a flag of cmd/manager", name, a)
		}
		args[k] = v
	}
	if args["namespace"] != "$(POD_NAMESPACE)" {
		t.Errorf("Deployment %s: want --namespace=$(POD_NAMESPACE), got %q", name, args["namespace"])
	}
	if _, ok := args["leader-elect"]; ok != leaderElect {
		t.Errorf("Deployment %s: --leader-elect present %v, want %v", name, ok, leaderElect)
	}
	podNS := false
	for _, e := range c.Env {
		podNS = podNS || (e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.namespace")
	}
	if !podNS {
		t.Errorf("Deployment %s: POD_NAMESPACE must come from the downward API (metadata.namespace)", name)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		t.Fatalf("Deployment %s: want HTTP liveness and readiness probes", name)
	}
	probePort := ""
	for _, p := range c.Ports {
		if p.Name == c.LivenessProbe.HTTPGet.Port.String() {
			probePort = fmt.Sprint(p.ContainerPort)
		}
	}
	if want := ":" + probePort; args["health-probe-bind-address"] != want {
		t.Errorf("Deployment %s: probes on port %q but --health-probe-bind-address=%q", name, probePort, args["health-probe-bind-address"])
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("Deployment %s: want liveness /healthz and readiness /readyz", name)
	}
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("Deployment %s: container must run as non-root, read-only root, no privilege escalation, drop ALL", name)
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("Deployment %s: set memory requests and limits", name)
	}
	if dep.Spec.Template.Spec.ServiceAccountName == "" {
		t.Errorf("Deployment %s: no serviceAccountName", name)
	}
}

// grant is one permission: verb on group/resource, in a namespace or
// cluster-wide ("").
type grant struct{ namespace, group, resource, verb string }

func (g grant) String() string {
	scope := "cluster-wide"
	if g.namespace != "" {
		scope = "in " + g.namespace
	}
	group := g.group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s/%s %s", g.verb, group, g.resource, scope)
}

// rbacObjects decodes the RBAC objects of a manifest set.
type rbacObjects struct {
	roles    map[string]rbacv1.ClusterRole // "Kind/namespace/name"
	bindings []rbacv1.RoleBinding          // ClusterRoleBindings have an empty namespace
	// userRoles are the ClusterRoles for people (label rekey.io/for=users),
	// bound by administrators, never to the manager.
	userRoles map[string]rbacv1.ClusterRole
}

func loadRBAC(t *testing.T, objs []object) rbacObjects {
	t.Helper()
	r := rbacObjects{roles: map[string]rbacv1.ClusterRole{}, userRoles: map[string]rbacv1.ClusterRole{}}
	for _, o := range objs {
		switch o.meta.Kind {
		case "Role", "ClusterRole":
			var role rbacv1.ClusterRole // same shape as Role, plus aggregationRule
			if err := yaml.UnmarshalStrict(o.raw, &role); err != nil {
				t.Fatalf("%s: %v", o, err)
			}
			if role.AggregationRule != nil {
				t.Errorf("%s: aggregation makes grants depend on other roles; list rules", o)
			}
			if role.Labels["rekey.io/for"] == "users" {
				r.userRoles[role.Name] = role
				continue
			}
			r.roles[o.meta.Kind+"/"+role.Namespace+"/"+role.Name] = role
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding
			if err := yaml.UnmarshalStrict(o.raw, &b); err != nil {
				t.Fatalf("%s: %v", o, err)
			}
			r.bindings = append(r.bindings, b)
		}
	}
	return r
}

var secretVerbs = []string{"get", "list", "watch", "create", "update"}

// checkRules: no wildcard anywhere; Secrets never deleted or patched (the
// manager reads them live; list and watch feed only the label-selected
// informer of the Secrets it wrote).
func checkRules(t *testing.T, what string, r rbacObjects) {
	t.Helper()
	if len(r.roles) == 0 {
		t.Fatalf("%s: no Role or ClusterRole", what)
	}
	for key, role := range r.roles {
		for _, rule := range role.Rules {
			for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames, rule.NonResourceURLs} {
				for _, v := range list {
					if strings.Contains(v, "*") {
						t.Errorf("%s: %s grants wildcard %q", what, key, v)
					}
				}
			}
			if len(rule.NonResourceURLs) > 0 {
				t.Errorf("%s: %s grants non-resource URLs %v", what, key, rule.NonResourceURLs)
			}
			if slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, "secrets") {
				for _, v := range rule.Verbs {
					if !slices.Contains(secretVerbs, v) {
						t.Errorf("%s: %s grants %s on secrets; the manager only gets, watches, creates and updates them", what, key, v)
					}
				}
			}
		}
	}
}

// effective computes what the ServiceAccount sa/namespace may do.
func effective(t *testing.T, what string, r rbacObjects, saNamespace, sa string) map[grant]bool {
	t.Helper()
	out := map[grant]bool{}
	for _, b := range r.bindings {
		bound := false
		for _, s := range b.Subjects {
			bound = bound || (s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == saNamespace)
		}
		if !bound {
			continue
		}
		roleKey := b.RoleRef.Kind + "/" + b.Namespace + "/" + b.RoleRef.Name
		if b.RoleRef.Kind == "ClusterRole" {
			roleKey = "ClusterRole//" + b.RoleRef.Name
		}
		role, ok := r.roles[roleKey]
		if !ok {
			t.Errorf("%s: binding %s/%s refers to missing %s", what, b.Namespace, b.Name, roleKey)
			continue
		}
		for _, rule := range role.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						out[grant{b.Namespace, g, res, v}] = true
					}
				}
			}
		}
	}
	for key := range r.roles {
		used := false
		for _, b := range r.bindings {
			k := b.RoleRef.Kind + "/" + b.Namespace + "/" + b.RoleRef.Name
			if b.RoleRef.Kind == "ClusterRole" {
				k = "ClusterRole//" + b.RoleRef.Name
			}
			used = used || k == key
		}
		if !used {
			t.Errorf("%s: %s is bound to nothing", what, key)
		}
	}
	return out
}

// needed is what the manager does, from internal/controller, cmd/manager and
// controller-runtime. Keep it in step with the code and docs/operations.md.
// watch lists the namespaces of namespaced mode; none: every namespace.
func needed(operatorNS string, secretNamespaces []string, leaderElection bool, watch ...string) map[grant]bool {
	out := map[grant]bool{}
	add := func(ns, group string, resources []string, verbs ...string) {
		for _, r := range resources {
			for _, v := range verbs {
				out[grant{ns, group, r, v}] = true
			}
		}
	}
	// CredentialSets: cached (list, watch), read live (get), trigger
	// annotations removed (patch); status: compare-and-set patches.
	if len(watch) == 0 {
		watch = []string{""}
	}
	for _, ns := range watch {
		add(ns, "rekey.io", []string{"credentialsets"}, "get", "list", "watch", "patch")
		add(ns, "rekey.io", []string{"credentialsets/status"}, "patch")
		// The set's Events (events.k8s.io recorder).
		add(ns, "events.k8s.io", []string{"events"}, "create", "patch")
		// Consumers and instance StatefulSets: cached (list, watch), the
		// instance StatefulSet read live (get), restart annotation patched.
		add(ns, "apps", []string{"statefulsets", "deployments", "daemonsets"}, "get", "list", "watch", "patch")
	}
	// A target namespace's consent annotation, read live.
	add("", "", []string{"namespaces"}, "get")
	// The secure metrics endpoint authenticates and authorizes callers.
	add("", "authentication.k8s.io", []string{"tokenreviews"}, "create")
	add("", "authorization.k8s.io", []string{"subjectaccessreviews"}, "create")
	// Source Secrets.
	add(operatorNS, "", []string{"secrets"}, secretVerbs...)
	// Distribution targets (get, create, update) and admin/adopt (get).
	for _, ns := range secretNamespaces {
		add(ns, "", []string{"secrets"}, secretVerbs...)
	}
	if leaderElection {
		add(operatorNS, "coordination.k8s.io", []string{"leases"}, "get", "create", "update")
		add(operatorNS, "", []string{"events"}, "create", "patch")
	}
	return out
}

// checkGrants: the ServiceAccount gets exactly what the manager needs.
func checkGrants(t *testing.T, what string, got, want map[grant]bool) {
	t.Helper()
	var missing, extra []string
	for g := range want {
		if !got[g] {
			missing = append(missing, g.String())
		}
	}
	for g := range got {
		if !want[g] {
			extra = append(extra, g.String())
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, m := range missing {
		t.Errorf("%s: the manager needs %s", what, m)
	}
	for _, e := range extra {
		t.Errorf("%s: grants %s, which the manager does not use", what, e)
	}
}

// TestConfigRBAC: config/ RBAC has no wildcard, no list/watch on Secrets,
// and grants the manager exactly what it uses.
func TestConfigRBAC(t *testing.T) {
	all := []object{}
	for _, f := range configFiles(t) {
		objs, err := decode(f, readFile(t, f))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, objs...)
	}
	checkRules(t, "config/", loadRBAC(t, all))

	r := loadRBAC(t, build(t, "config/default"))
	got := effective(t, "config/default", r, operatorNamespace, "rekey-controller-manager")
	checkGrants(t, "config/default", got, needed(operatorNamespace, []string{""}, true))
	checkUserRoles(t, "config/default", r, "rekey")
}

// checkUserRoles: the roles for people exist, are aggregated into the
// built-in roles that fit them, and grant nothing but CredentialSets (and
// the metrics URL): creating a CredentialSet must not come with any other
// right.
func checkUserRoles(t *testing.T, what string, r rbacObjects, prefix string) {
	t.Helper()
	want := map[string][]string{
		prefix + "-edit":           {"rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-admin"},
		prefix + "-view":           {"rbac.authorization.k8s.io/aggregate-to-view"},
		prefix + "-metrics-reader": nil,
	}
	for name, labels := range want {
		role, ok := r.userRoles[name]
		if !ok {
			t.Errorf("%s: no ClusterRole %s for users", what, name)
			continue
		}
		for _, l := range labels {
			if role.Labels[l] != "true" {
				t.Errorf("%s: %s lacks label %s=true", what, name, l)
			}
		}
		for _, rule := range role.Rules {
			if len(rule.NonResourceURLs) > 0 {
				if name != prefix+"-metrics-reader" || !slices.Equal(rule.NonResourceURLs, []string{"/metrics"}) || !slices.Equal(rule.Verbs, []string{"get"}) {
					t.Errorf("%s: %s grants %v on %v", what, name, rule.Verbs, rule.NonResourceURLs)
				}
				continue
			}
			if !slices.Equal(rule.APIGroups, []string{"rekey.io"}) {
				t.Errorf("%s: %s grants on API groups %v; users' roles grant CredentialSets only", what, name, rule.APIGroups)
			}
			for _, res := range rule.Resources {
				if res != "credentialsets" && res != "credentialsets/status" {
					t.Errorf("%s: %s grants on %s", what, name, res)
				}
			}
			if strings.HasSuffix(name, "-view") {
				for _, v := range rule.Verbs {
					if v != "get" && v != "list" && v != "watch" {
						t.Errorf("%s: %s grants %s", what, name, v)
					}
				}
			}
		}
	}
}
