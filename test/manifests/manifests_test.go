// Package manifests checks the install manifests without a cluster: the
// kustomize tree in config/, the Helm chart in charts/rekey (rendered with
// Go's text/template, see helm_render_test.go) and the samples. It proves
// that the RBAC grants exactly what the manager uses — no wildcard, no list
// or watch on Secrets — so a change in either shows up here.
package manifests

// Reading manifests: files, YAML documents, and a kustomization's resources.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
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
	ConfigMapGenerator []struct {
		Files []string `json:"files"`
	} `json:"configMapGenerator"`
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
