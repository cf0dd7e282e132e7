package manifests

// config/ as files: every manifest parses and belongs to a kustomization,
// the default install is complete, the samples decode into the API types,
// and the manager's Deployment passes only flags the manager defines.

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	v1 "rekey.io/rekey/api/v1alpha1"
	_ "rekey.io/rekey/internal/backend/all"
	"rekey.io/rekey/internal/backend/registry"
)

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
		for _, g := range k.ConfigMapGenerator {
			for _, f := range g.Files {
				_, file, ok := strings.Cut(f, "=") // key=file
				if !ok {
					file = f
				}
				refs = append(refs, file)
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
	// main.go also defines each registered backend's own flags.
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	registry.BindFlags(fs)
	fs.VisitAll(func(f *flag.Flag) { flags[f.Name] = true })
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
