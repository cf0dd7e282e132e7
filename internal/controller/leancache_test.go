package controller

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
)

func fatMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "ns", Name: "w", Generation: 3,
		Labels:        map[string]string{"app": "w"},
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: "{…}", "team": "a"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
}

func fatTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "w"},
			Annotations: map[string]string{"rekey.io/restart-x-1234abcd": "rot-1", "prometheus.io/scrape": "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
}

// TestTrimWorkload: what the cache keeps of a workload is exactly what the
// rollout gate and the restart read; the rest is gone.
func TestTrimWorkload(t *testing.T) {
	wantTmpl := map[string]string{restartKey: "rot-1"}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "w"}}
	tests := []struct {
		name string
		obj  any
	}{
		{"StatefulSet", &appsv1.StatefulSet{ObjectMeta: fatMeta(), Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](3), Selector: sel, Template: fatTemplate(),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{}},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}}},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 3, ReadyReplicas: 3, UpdatedReplicas: 2, CurrentRevision: "a", UpdateRevision: "b"}}},
		{"Deployment", &appsv1.Deployment{ObjectMeta: fatMeta(), Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2), Selector: sel, Template: fatTemplate(), Paused: true},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 1, Replicas: 2}}},
		{"DaemonSet", &appsv1.DaemonSet{ObjectMeta: fatMeta(), Spec: appsv1.DaemonSetSpec{
			Selector: sel, Template: fatTemplate(),
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 4, UpdatedNumberScheduled: 1}}},
		// cronJobRollout reads the UID (its Jobs' owner), the namespace and
		// the job template's restart annotation; status.active changing is
		// what wakes a set.
		{"CronJob", &batchv1.CronJob{ObjectMeta: func() metav1.ObjectMeta { m := fatMeta(); m.UID = "cj-uid"; return m }(),
			Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "w"}},
				Spec:       batchv1.JobSpec{Selector: sel, Template: fatTemplate()}}},
			Status: batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Name: "w-1"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := gateReads(tt.obj.(client.Object).DeepCopyObject().(client.Object))
			got, err := trimWorkload(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			w := got.(interface {
				GetManagedFields() []metav1.ManagedFieldsEntry
				GetAnnotations() map[string]string
				GetLabels() map[string]string
			})
			if len(w.GetManagedFields()) != 0 {
				t.Errorf("managedFields kept: %v", w.GetManagedFields())
			}
			if _, ok := w.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; ok {
				t.Error("last-applied-configuration kept")
			}
			if w.GetAnnotations()["team"] != "a" || w.GetLabels()["app"] != "w" {
				t.Errorf("object's own labels/annotations changed: %v %v", w.GetLabels(), w.GetAnnotations())
			}
			tmpl := templateOf(got)
			if !equality.Semantic.DeepEqual(tmpl, corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: wantTmpl}}) {
				t.Errorf("template kept %+v, want only rekey's annotation", tmpl)
			}
			if after := gateReads(got.(client.Object)); after != before {
				t.Errorf("rollout gate reads %+v after the trim, %+v before", after, before)
			}
		})
	}
	// Anything else (a tombstone) passes unchanged.
	if got, err := trimWorkload("tombstone"); err != nil || got != "tombstone" {
		t.Errorf("trimWorkload(other) = %v, %v", got, err)
	}
}

func templateOf(o any) corev1.PodTemplateSpec {
	switch w := o.(type) {
	case *appsv1.StatefulSet:
		if w.Spec.VolumeClaimTemplates != nil {
			return corev1.PodTemplateSpec{} // fails the comparison
		}
		return w.Spec.Template
	case *appsv1.Deployment:
		return w.Spec.Template
	case *appsv1.DaemonSet:
		return w.Spec.Template
	case *batchv1.CronJob:
		if w.UID != "cj-uid" || len(w.Status.Active) != 1 || w.Spec.JobTemplate.Spec.Selector != nil {
			return corev1.PodTemplateSpec{} // fails the comparison
		}
		return w.Spec.JobTemplate.Spec.Template
	}
	return corev1.PodTemplateSpec{}
}

// gateReads is what consumers.go reads of a workload: the rollout gate's
// verdict and rekey's restart annotation.
func gateReads(o client.Object) gateView {
	return gateView{rolloutOf(o), templateAnnotations(o)[restartKey]}
}

type gateView struct {
	ro      engine.RolloutState
	restart string
}

const restartKey = "rekey.io/restart-x-1234abcd"

// TestTrimForeignSecret: a Secret that carries rekey's label but no set's
// UID keeps only its name, rekey's label and rekey's annotations in the
// cache; a Secret rekey wrote (its set's UID) is kept whole, since rekey
// reads and updates it from the cache.
func TestTrimForeignSecret(t *testing.T) {
	big := strings.Repeat("x", 200_000)
	planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "planted",
		Labels:      map[string]string{naming.ManagedByLabel: naming.ManagedByValue, "bulk": "y"},
		Annotations: map[string]string{"bulk": big, naming.CredentialSetAnnot: "other/db"}},
		Data: map[string][]byte{"k": []byte(big)}}
	got, _ := trimForeignSecret(planted)
	s := got.(*corev1.Secret)
	if s.Data != nil || s.Labels["bulk"] != "" || s.Annotations["bulk"] != "" {
		t.Errorf("a foreign Secret kept its payload: %d data keys, labels %v, %d annotations", len(s.Data), s.Labels, len(s.Annotations))
	}
	if s.Name != "planted" || s.Labels[naming.ManagedByLabel] != naming.ManagedByValue || s.Annotations[naming.CredentialSetAnnot] != "other/db" {
		t.Errorf("a foreign Secret lost what the watch reads: %+v", s.ObjectMeta)
	}
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db-creds",
		Labels:      map[string]string{naming.ManagedByLabel: naming.ManagedByValue},
		Annotations: map[string]string{naming.CredentialSetUIDAnnot: "uid-1", "reloader.stakater.com/match": "true"}},
		Data: map[string][]byte{"password": []byte("p")}}
	got, _ = trimForeignSecret(own)
	if s := got.(*corev1.Secret); string(s.Data["password"]) != "p" || s.Annotations["reloader.stakater.com/match"] != "true" {
		t.Errorf("rekey's own Secret was trimmed: %+v", s)
	}
}
