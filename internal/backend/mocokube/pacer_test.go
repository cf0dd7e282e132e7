package mocokube

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/moco"
)

// TestPacerRegistered: the registry finds MOCO pacing its cluster's
// StatefulSet (and nobody pacing another), and MOCO's health is the
// MySQLCluster's Healthy condition, unknown when it cannot be read.
func TestPacerRegistered(t *testing.T) {
	p := int32(2)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco-" + cluster,
			Labels:          map[string]string{moco.LabelName: moco.AppNameMySQL, moco.LabelInstance: cluster, moco.LabelCreatedBy: moco.CreatedBy},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: moco.APIVersion, Kind: moco.Kind, Name: cluster}}},
		Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &p}}},
	}
	got, kind, owner, ok := registry.PacerOf(sts)
	if !ok || got.Name != "MOCO" || kind != moco.Kind || owner != cluster {
		t.Fatalf("PacerOf(MOCO's StatefulSet) = %q, %s/%s, %v; want MOCO, %s/%s", got.Name, kind, owner, ok, moco.Kind, cluster)
	}
	other := sts.DeepCopy()
	other.OwnerReferences = nil
	if _, _, _, ok := registry.PacerOf(other); ok {
		t.Error("a StatefulSet MOCO does not own is paced")
	}

	k := fixture(t, func(objs []client.Object) []client.Object {
		mc := objs[0].(*unstructured.Unstructured)
		_ = unstructured.SetNestedSlice(mc.Object, []any{map[string]any{"type": "Healthy", "status": "False", "reason": "Degraded",
			"message": "", "lastTransitionTime": "2026-01-01T10:00:00Z"}}, "status", "conditions")
		return objs
	})
	h := got.Health(context.Background(), k.c, ns, cluster)
	if want := (registry.OwnerHealth{Known: true, Reason: "Degraded", Since: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}); !h.Since.Equal(want.Since) || h.Known != want.Known || h.Healthy || h.Reason != want.Reason {
		t.Errorf("health %+v, want %+v", h, want)
	}
	if h := got.Health(context.Background(), k.c, ns, "gone"); h.Known {
		t.Errorf("a MySQLCluster that cannot be read has known health %+v", h)
	}
}
