package manifests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"rekey.io/rekey/internal/testenv"
)

// TestCRDUpgradePath proves the CRD upgrade the docs give (Helm installs
// crds/ once and never upgrades it): over a CRD that Helm created (field
// manager helm) from an older chart, `kubectl apply --server-side
// --force-conflicts -f charts/rekey/crds/` — the same server-side apply
// request, made here through the dynamic client — stores the chart's CRD;
// without --force-conflicts the API server refuses it, naming helm.
func TestCRDUpgradePath(t *testing.T) {
	t.Parallel()
	testenv.Require(t)
	crds := unstructuredObjects(t, chartCRDFile, readFile(t, chartCRDFile))
	if len(crds) != 1 || crds[0].GetKind() != "CustomResourceDefinition" {
		t.Fatalf("%s: want one CustomResourceDefinition", chartCRDFile)
	}
	current := crds[0]
	// An older release's CRD: another short name, no printer columns.
	old := current.DeepCopy()
	if err := unstructured.SetNestedStringSlice(old.Object, []string{"legacy-rekey-name"}, "spec", "names", "shortNames"); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(old.Object, "spec", "versions")
	for _, v := range versions {
		delete(v.(map[string]any), "additionalPrinterColumns")
	}
	if err := unstructured.SetNestedSlice(old.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}

	k := newCluster(t)
	dyn, err := dynamic.NewForConfig(k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	ctx := context.Background()
	if _, err := dyn.Resource(gvr).Create(ctx, old, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
		t.Fatal(err)
	}
	k.waitEstablished(t, current.GetName())

	_, err = dyn.Resource(gvr).Apply(ctx, current.GetName(), current, metav1.ApplyOptions{FieldManager: "kubectl"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "helm") {
		t.Errorf("server-side apply without --force-conflicts over Helm's CRD: %v; want a conflict naming helm (the docs say to force)", err)
	}
	if _, err := dyn.Resource(gvr).Apply(ctx, current.GetName(), current, metav1.ApplyOptions{FieldManager: "kubectl", Force: true}); err != nil {
		t.Fatalf("kubectl apply --server-side --force-conflicts -f %s: %v", chartCRDFile, err)
	}
	got, err := dyn.Resource(gvr).Get(ctx, current.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range [][]string{{"spec", "names"}, {"spec", "versions"}, {"spec", "scope"}, {"spec", "group"}} {
		want, _, _ := unstructured.NestedFieldNoCopy(current.Object, path...)
		have, _, _ := unstructured.NestedFieldNoCopy(got.Object, path...)
		if fmt.Sprint(normalize(t, want)) != fmt.Sprint(normalize(t, have)) {
			t.Errorf("after the upgrade the stored CRD's %s differs from %s", strings.Join(path, "."), chartCRDFile)
		}
	}
	k.waitEstablished(t, current.GetName())
}

// normalize round-trips v through JSON, so that values decoded from YAML
// and from the API server compare equal (int64 against float64 numbers).
func normalize(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
