package controller

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
)

// cronJobRecheck is how often a set looks again at a CronJob consumer
// while a Job from before the new credentials still runs. A Job the
// CronJob made itself wakes the set when it ends (the CronJob's
// status.active changes, and CronJobs are watched); one made with kubectl
// create job --from changes nothing rekey watches, so it is looked at
// again after this long. Jobs are not watched: that would hold every Job
// of the cluster in the manager's memory.
const cronJobRecheck = 30 * time.Second

// cronJobRollout judges CronJob cj (engine.CronJobRollout) from the Jobs
// it controls, listed live in its namespace.
func (r *Reconciler) cronJobRollout(ctx context.Context, cs *v1.CredentialSet, cj *batchv1.CronJob) (engine.RolloutState, time.Duration) {
	want := engine.RestartValue(cs.Status)
	if want == "" {
		return engine.CronJobRollout(nil, "", ""), 0
	}
	reader := client.Reader(r.Client)
	if r.APIReader != nil {
		reader = r.APIReader
	}
	var list batchv1.JobList
	if err := reader.List(ctx, &list, client.InNamespace(cj.Namespace)); err != nil {
		return engine.RolloutState{Message: "the CronJob's Jobs cannot be listed (" + apiReason(err) + "): rekey's manager needs list on jobs in namespace " + cj.Namespace}, cronJobRecheck
	}
	var own []batchv1.Job
	for _, j := range list.Items {
		if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == cj.UID {
			own = append(own, j)
		}
	}
	ro := engine.CronJobRollout(own, naming.RestartAnnotation(cs), want)
	if ro.Done {
		return ro, 0
	}
	return ro, cronJobRecheck
}

// restartWords is the ConsumerRestarted Event's format for a consumer of
// kind (its arguments: kind, namespace, name).
func restartWords(kind v1.ConsumerKind) string {
	if kind == v1.KindCronJob {
		return "marking %s %s/%s's job template: its next Jobs start with the new credentials, and rekey waits for the Jobs started before to end"
	}
	return "restarting %s %s/%s to pick up the new credentials"
}
