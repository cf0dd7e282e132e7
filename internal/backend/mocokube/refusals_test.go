package mocokube

import (
	"context"
	"errors"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/moco"
	"rekey.io/rekey/internal/reason"
)

// without drops the fixture's object i.
func without(i int) func([]client.Object) []client.Object {
	return func(objs []client.Object) []client.Object { return append(objs[:i:i], objs[i+1:]...) }
}

// secretEdit changes the fixture's Secret i.
func secretEdit(i int, f func(*corev1.Secret)) func([]client.Object) []client.Object {
	return func(objs []client.Object) []client.Object { f(objs[i].(*corev1.Secret)); return objs }
}

// TestResolveRefusals: what Resolve refuses, and why.
func TestResolveRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		system string
		edit   func([]client.Object) []client.Object
		why    reason.Reason // "": a spec error
	}{
		{"no MOCO namespace set for the manager", "", nil, reason.MOCONotReady},
		{"no such MySQLCluster", system, without(0), ""},
		{"a MOCO that rotates itself (annotation)", system, func(objs []client.Object) []client.Object {
			objs[0].SetAnnotations(map[string]string{moco.OwnRotateAnnotation: "x"})
			return objs
		}, reason.MOCORotatesItself},
		{"a MOCO that rotates itself (CRD status schema)", system, func(objs []client.Object) []client.Object {
			crd := objs[1].(*unstructured.Unstructured)
			props := []string{"spec", "versions"}
			versions, _, _ := unstructured.NestedSlice(crd.Object, props...)
			_ = unstructured.SetNestedField(versions[0].(map[string]any), map[string]any{}, "schema", "openAPIV3Schema", "properties", "status", "properties", moco.OwnRotationStatusField)
			_ = unstructured.SetNestedSlice(crd.Object, versions, props...)
			return objs
		}, reason.MOCORotatesItself},
		{"no controller Secret yet", system, without(2), reason.MOCONotReady},
		{"a controller Secret of another cluster", system, secretEdit(2, func(s *corev1.Secret) { s.Labels[moco.LabelInstance] = "other" }), reason.NotOwned},
		{"a controller Secret lacking a password", system, secretEdit(2, func(s *corev1.Secret) { delete(s.Data, "REPLICATION_PASSWORD") }), reason.MOCONotReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(context.Background(), set("1"), fixture(t, tc.edit), tc.system)
			if tc.why != "" {
				refusedFor(t, err, tc.why)
				return
			}
			if se := (*registry.SpecError)(nil); !errors.As(err, &se) {
				t.Fatalf("want a spec error, got %v", err)
			}
		})
	}
}

// TestWriteRefusesSecretNotMOCOs: a user Secret the MySQLCluster does not
// own is never written.
func TestWriteRefusesSecretNotMOCOs(t *testing.T) {
	k := fixture(t, secretEdit(3, func(s *corev1.Secret) { s.OwnerReferences = nil }))
	c, err := Resolve(context.Background(), set("1"), k, system)
	if err != nil {
		t.Fatal(err)
	}
	refusedFor(t, c.Write(context.Background(), c.Current), reason.NotOwned)
	for _, u := range k.updates {
		if u == ns+"/"+names.UserSecret {
			t.Errorf("the Secret not owned by the cluster was updated")
		}
	}
}

// TestGate: MOCO's conditions gate every phase; a running backup Job
// holds back only a discard.
func TestGate(t *testing.T) {
	ctx := context.Background()
	unhealthy := func(objs []client.Object) []client.Object {
		conds, _, _ := unstructured.NestedSlice(objs[0].(*unstructured.Unstructured).Object, "status", "conditions")
		conds[0].(map[string]any)["status"] = "False"
		_ = unstructured.SetNestedSlice(objs[0].(*unstructured.Unstructured).Object, conds, "status", "conditions")
		return objs
	}
	backup := func(objs []client.Object) []client.Object {
		return append(objs, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backup-1", OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "batch/v1", Kind: "CronJob", Name: names.BackupCronJob, UID: "cj", Controller: ptr.To(true)}}},
			Status: batchv1.JobStatus{Active: 1}})
	}
	for _, tc := range []struct {
		name    string
		edit    func([]client.Object) []client.Object
		discard bool
		why     reason.Reason // "": open
	}{
		{"healthy", nil, true, ""},
		{"unhealthy", unhealthy, false, reason.ClusterUnhealthy},
		{"a backup running, before a rotation", backup, false, ""},
		{"a backup running, before a discard", backup, true, reason.DiscardRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Resolve(ctx, set("1"), fixture(t, tc.edit), system)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Gate(ctx, tc.discard)
			if tc.why == "" {
				if err != nil {
					t.Fatalf("gate closed: %v", err)
				}
				return
			}
			refusedFor(t, err, tc.why)
		})
	}
}
