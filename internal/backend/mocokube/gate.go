package mocokube

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/moco"
	"rekey.io/rekey/internal/reason"
)

// Gate is the set's health gate beyond the instances' own: MOCO's
// conditions before a rotation or discard starts, and, before a discard,
// no backup Job of the cluster running (it holds the BACKUP_PASSWORD it
// read when it started).
func (c *Cluster) Gate(ctx context.Context, discard bool) error {
	mc, err := c.mysqlCluster(ctx)
	if err != nil {
		return err
	}
	raw, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	var conds []metav1.Condition
	for _, r := range raw {
		cm, _ := r.(map[string]any)
		var cond metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cm, &cond); err == nil {
			conds = append(conds, cond)
		}
	}
	if why := moco.Health(conds); why != "" {
		return refusal(reason.ClusterUnhealthy, "%s", why)
	}
	if !discard {
		return nil
	}
	var jobs batchv1.JobList
	if err := c.k.List(ctx, &jobs, client.InNamespace(c.namespace)); err != nil {
		return err
	}
	for _, j := range jobs.Items {
		owner := metav1.GetControllerOf(&j)
		if owner != nil && owner.Kind == "CronJob" && owner.Name == c.names.BackupCronJob && j.Status.Active > 0 {
			return refusal(reason.DiscardRefused,
				"MOCO's backup Job %s/%s is running with the backup password it read when it started; the discard waits until it ends and goes on by itself",
				c.namespace, j.Name)
		}
	}
	return nil
}
