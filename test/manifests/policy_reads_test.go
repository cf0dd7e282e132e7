package manifests

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestPolicyChecksEverySecretASetReads: every field of the spec that names
// a Secret for rekey to read (a SecretKeyRef or LocalSecretRef, in any
// backend's block) is one the admission policy checks the author may
// read, in the kustomize install and in the chart. A backend or field
// added without its line in the policy fails here.
func TestPolicyChecksEverySecretASetReads(t *testing.T) {
	refs := secretRefPaths("spec", reflect.TypeOf(v1.CredentialSetSpec{}))
	if len(refs) < 8 {
		t.Fatalf("found only %v: the walk of the API types is broken", refs)
	}
	for _, file := range []string{"config/policy/credentialset_namespaces.yaml", "charts/rekey/templates/admission-policy.yaml"} {
		raw, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range refs {
			if !strings.Contains(string(raw), "'field': '"+ref+"'") {
				t.Errorf("%s does not check the author may read the Secret %s names", file, ref)
			}
		}
	}
}

// secretRefPaths lists the JSON paths under t of fields whose type is a
// reference to a Secret of the set's namespace.
func secretRefPaths(path string, t reflect.Type) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t == reflect.TypeOf(v1.SecretKeyRef{}) || t == reflect.TypeOf(v1.LocalSecretRef{}) {
		return []string{path}
	}
	if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeOf(v1.CredentialSetSpec{}).PkgPath() {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, secretRefPaths(path+"."+name, f.Type)...)
	}
	return out
}

// TestChartPolicyIsKustomizes: the chart's admission policies are the
// kustomize install's, but for the names the release gives (the policies',
// the operator's namespace, the manager's ServiceAccount), so a fix in one
// cannot miss the other.
func TestChartPolicyIsKustomizes(t *testing.T) {
	const release, ns, fullname = "prod", "ops", "prod-rekey"
	objs, err := render(t, release, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	chart := map[string]string{}
	for _, o := range objs {
		if strings.HasPrefix(o.meta.Kind, "ValidatingAdmissionPolicy") {
			chart[o.meta.Kind+"/"+o.meta.Metadata.Name] = strings.TrimSpace(string(o.raw))
		}
	}
	file := "config/policy/credentialset_namespaces.yaml"
	kobjs, err := decode(file, readFile(t, file))
	if err != nil {
		t.Fatal(err)
	}
	if len(kobjs) != len(chart) || len(kobjs) != 4 {
		t.Fatalf("%d policy objects in %s, %d in the chart; want the same 4", len(kobjs), file, len(chart))
	}
	for _, k := range kobjs {
		name := strings.Replace(k.meta.Metadata.Name, "rekey-", fullname+"-", 1)
		got, ok := chart[k.meta.Kind+"/"+name]
		if !ok {
			t.Errorf("the chart has no %s %s", k.meta.Kind, name)
			continue
		}
		want := string(k.raw)
		for _, r := range [][2]string{
			{"system:serviceaccount:rekey-system:rekey-controller-manager", "system:serviceaccount:" + ns + ":" + fullname + "-controller-manager"},
			{"'rekey-system'", "'" + ns + "'"},
			{"name: rekey-", "name: " + fullname + "-"},
			{"policyName: rekey-", "policyName: " + fullname + "-"},
		} {
			want = strings.ReplaceAll(want, r[0], r[1])
		}
		if !sameYAMLIgnoringLabels(t, got, want) {
			t.Errorf("the chart's %s %s differs from %s's:\n--- chart\n%s\n--- kustomize (renamed)\n%s", k.meta.Kind, name, file, got, want)
		}
	}
}

// sameYAMLIgnoringLabels compares two objects' content but their labels
// (the chart adds its own).
func sameYAMLIgnoringLabels(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y map[string]any
	if err := yaml.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string]any{x, y} {
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "labels")
		}
	}
	return reflect.DeepEqual(x, y)
}
