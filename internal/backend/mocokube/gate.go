package mocokube

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	if why := moco.Health(moco.Conditions(mc.Object)); why != "" {
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
