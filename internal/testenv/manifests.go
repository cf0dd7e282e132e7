package testenv

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Manifests reads the objects of a YAML file of the repository (relative
// to its root), as kubectl apply -f would: tests install what the project
// ships, not a copy of it.
func (e *Env) Manifests(rel string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(filepath.Join(e.RepoRoot, rel))
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
