package moco

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// ForceRollingUpdateAnnotation (MOCO's pkg/constants AnnForceRollingUpdate):
// with "true" on its StatefulSet MOCO neither partitions nor paces a
// rollout; the StatefulSet controller rolls it as any other.
const ForceRollingUpdateAnnotation = "moco.cybozu.com/force-rolling-update"

// PacedBy names the MySQLCluster whose MOCO paces the rollout of sts, or
// "" when MOCO does not. It asks exactly what MOCO's own code asks
// (v0.36.0), read from the StatefulSet alone so that it holds with or
// without the right to read MySQLClusters:
//   - MOCO's StatefulSet webhook sets rollingUpdate.partition to the
//     replicas on every change of the pod template when the StatefulSet has
//     exactly one owner reference, a MySQLCluster, and is not annotated
//     force-rolling-update;
//   - MOCO's partition controller then lowers it one pod at a time, for
//     the StatefulSets labelled app.kubernetes.io/name=mysql and
//     app.kubernetes.io/created-by=moco, while the cluster is Healthy.
//
// A StatefulSet that has a partition but misses any of these is paced by
// nobody, and a partition on it is a stall a person must end.
func PacedBy(sts *appsv1.StatefulSet) string {
	if len(sts.OwnerReferences) != 1 {
		return ""
	}
	owner := sts.OwnerReferences[0]
	if owner.Kind != Kind || owner.APIVersion != APIVersion {
		return ""
	}
	if sts.Labels[LabelName] != AppNameMySQL || sts.Labels[LabelCreatedBy] != CreatedBy {
		return ""
	}
	if sts.Annotations[ForceRollingUpdateAnnotation] == "true" {
		return ""
	}
	if sts.Spec.UpdateStrategy.RollingUpdate == nil || sts.Spec.UpdateStrategy.RollingUpdate.Partition == nil {
		return ""
	}
	return owner.Name
}

// HealthyCondition is the MySQLCluster's Healthy condition (MOCO's
// clustering loop writes it every cycle), or nil when MOCO has not
// written it.
func HealthyCondition(conds []metav1.Condition) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == CondHealthy {
			return &conds[i]
		}
	}
	return nil
}

// Conditions are the status conditions of a MySQLCluster read as an
// unstructured object (rekey does not import MOCO's Go types); entries
// that are not conditions are skipped.
func Conditions(mysqlCluster map[string]any) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(mysqlCluster, "status", "conditions")
	var conds []metav1.Condition
	for _, r := range raw {
		cm, _ := r.(map[string]any)
		var cond metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cm, &cond); err == nil {
			conds = append(conds, cond)
		}
	}
	return conds
}
