package manifests

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestSpecIsBounded: every list, map and string a user writes into a
// CredentialSet's spec has a bound the API server enforces, so a tenant
// cannot make the manager (which holds every set in memory and reads each
// one often) or etcd carry an unbounded object, and a refusal names the
// limit. The status is the manager's own and is not checked.
func TestSpecIsBounded(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, crdFile))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			t.Fatalf("%s: no spec in the schema", v.Name)
		}
		unbounded := unboundedFields(".spec", spec)
		sort.Strings(unbounded)
		for _, f := range unbounded {
			t.Errorf("%s: %s has no size bound (maxItems, maxProperties, maxLength or enum)", v.Name, f)
		}
	}
}

// unboundedFields lists the paths under s whose size is not bounded.
func unboundedFields(path string, s apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	switch s.Type {
	case "array":
		if s.MaxItems == nil {
			out = append(out, path)
		}
		if s.Items != nil && s.Items.Schema != nil {
			out = append(out, unboundedFields(path+"[]", *s.Items.Schema)...)
		}
	case "string":
		if s.MaxLength == nil && len(s.Enum) == 0 {
			out = append(out, path)
		}
	case "object":
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			if s.MaxProperties == nil {
				out = append(out, path)
			}
			out = append(out, unboundedFields(path+"[*]", *s.AdditionalProperties.Schema)...)
		}
		for name, p := range s.Properties {
			out = append(out, unboundedFields(path+"."+name, p)...)
		}
	}
	return out
}
