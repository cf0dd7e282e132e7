package controller

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"rekey.io/rekey/internal/naming"
)

// trimWorkload is the cache transform of StatefulSets, Deployments,
// DaemonSets and CronJobs. rekey watches every workload of the cluster (a consumer may
// be any of them) but reads of each only its name, generation, replicas,
// update strategy, paused flag, status, and its own restart annotation on
// the pod template (consumers.go, engine's rollout gate). The pod spec,
// volume claim templates, managedFields and kubectl's last-applied copy
// are most of an object's size, so they are dropped before the object is
// stored: nothing that reads the cache can miss them, and nothing writes a
// cached workload back (the restart is a merge patch of one annotation).
// Reads that need a whole workload (the StatefulSet holding MySQL
// instances, the finalizer's existence check) use the API reader.
func trimWorkload(obj any) (any, error) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		trimMeta(&w.ObjectMeta)
		trimTemplate(&w.Spec.Template)
		w.Spec.Selector = nil
	case *appsv1.StatefulSet:
		trimMeta(&w.ObjectMeta)
		trimTemplate(&w.Spec.Template)
		w.Spec.Selector, w.Spec.VolumeClaimTemplates = nil, nil
	case *appsv1.DaemonSet:
		trimMeta(&w.ObjectMeta)
		trimTemplate(&w.Spec.Template)
		w.Spec.Selector = nil
	case *batchv1.CronJob:
		// Its Jobs are read live (cronJobRollout); the cache keeps the
		// job template's rekey annotations and status.active.
		trimMeta(&w.ObjectMeta)
		trimTemplate(&w.Spec.JobTemplate.Spec.Template)
		w.Spec.JobTemplate.Spec.Selector = nil
		w.Spec.JobTemplate.ObjectMeta = metav1.ObjectMeta{}
	}
	return obj, nil
}

func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	delete(m.Annotations, corev1.LastAppliedConfigAnnotation)
}

// trimTemplate keeps only rekey's annotations of a pod template.
func trimTemplate(t *corev1.PodTemplateSpec) {
	var keep map[string]string
	for k, v := range t.Annotations {
		if strings.HasPrefix(k, "rekey.io/") {
			if keep == nil {
				keep = map[string]string{}
			}
			keep[k] = v
		}
	}
	*t = corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: keep}}
}

// trimForeignSecret is the cache transform of Secrets. The cache holds the
// Secrets with rekey's label, and anyone who may create a Secret can put
// that label on one: of a Secret that does not carry a set's UID (so not
// one rekey wrote) the cache keeps only its name, rekey's label and
// rekey's annotations. Nothing reads such a Secret from the cache (rekey
// reads a Secret it did not write live, fresh.go), so nothing misses the
// rest; a tenant's labelled Secrets then cost the manager a few hundred
// bytes each, whatever they hold.
func trimForeignSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok || s.Annotations[naming.CredentialSetUIDAnnot] != "" {
		return obj, nil
	}
	s.Data, s.StringData, s.ManagedFields = nil, nil, nil
	s.Labels = keepPrefixed(s.Labels, naming.ManagedByLabel)
	s.Annotations = keepPrefixed(s.Annotations, "rekey.io/")
	return s, nil
}

// keepPrefixed is m with only the keys that begin with prefix.
func keepPrefixed(m map[string]string, prefix string) map[string]string {
	var keep map[string]string
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			if keep == nil {
				keep = map[string]string{}
			}
			keep[k] = v
		}
	}
	return keep
}
