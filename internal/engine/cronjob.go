package engine

import (
	"fmt"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// CronJobRollout judges a CronJob consumer. Nothing of a CronJob restarts:
// each Job's pods read the credentials when they start. rekey marks the
// CronJob's job template with the restart value (key: want) once the new
// credentials are distributed, so a Job whose template carries it started
// with them; a Job without it started before and holds the old ones until
// it ends. The CronJob has moved once none of those still runs. jobs are
// the Jobs the CronJob controls (its own and kubectl create job --from,
// which the CronJob's status.active does not list).
func CronJobRollout(jobs []batchv1.Job, key, want string) RolloutState {
	if want == "" {
		return RolloutState{Done: true}
	}
	var old []string
	for _, j := range jobs {
		if JobFinished(&j) || j.Spec.Template.Annotations[key] == want {
			continue
		}
		old = append(old, j.Name)
	}
	if len(old) == 0 {
		return RolloutState{Done: true}
	}
	sort.Strings(old)
	return RolloutState{Message: fmt.Sprintf(
		"Job %s started before the new credentials and still runs with the old ones; rekey waits for it to end (or delete it: kubectl delete job %s); the CronJob's next Jobs start with the new credentials",
		strings.Join(old, ", "), strings.Join(old, " "))}
}

// JobFinished: the Job completed or failed for good (its Complete or
// Failed condition is True), so none of its pods runs any more.
func JobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
