package engine

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCronJobRollout(t *testing.T) {
	const key = "rekey.io/restart-shop-app"
	job := func(name, mark string, conds ...batchv1.JobConditionType) batchv1.Job {
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if mark != "" {
			j.Spec.Template.Annotations = map[string]string{key: mark}
		}
		for _, c := range conds {
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
		}
		return j
	}
	for _, tc := range []struct {
		name string
		jobs []batchv1.Job
		want string
		done bool
		says []string
	}{
		{"no rotation yet", []batchv1.Job{job("a-1", "")}, "", true, nil},
		{"no Job runs", nil, "r2", true, nil},
		{"every Job started with the new credentials", []batchv1.Job{job("a-2", "r2")}, "r2", true, nil},
		{"an old Job completed", []batchv1.Job{job("a-1", "r1", batchv1.JobComplete), job("a-2", "r2")}, "r2", true, nil},
		{"an old Job failed for good", []batchv1.Job{job("a-1", "", batchv1.JobFailed)}, "r2", true, nil},
		{"an old Job still runs", []batchv1.Job{job("a-1", "r1"), job("a-2", "r2")}, "r2", false, []string{"Job a-1 started before", "kubectl delete job a-1"}},
		{"a Job from before any mark still runs", []batchv1.Job{job("m-1", "")}, "r1", false, []string{"Job m-1"}},
		{"a suspended old Job holds no pod but counts until it ends", []batchv1.Job{job("a-1", "r1", batchv1.JobSuspended)}, "r2", false, []string{"Job a-1"}},
		{"two old Jobs, named in order", []batchv1.Job{job("b", "r1"), job("a", "")}, "r2", false, []string{"Job a, b", "kubectl delete job a b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro := CronJobRollout(tc.jobs, key, tc.want)
			if ro.Done != tc.done || ro.Stuck {
				t.Errorf("done %v stuck %v, want done %v (%s)", ro.Done, ro.Stuck, tc.done, ro.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(ro.Message, s) {
					t.Errorf("message %q does not say %q", ro.Message, s)
				}
			}
		})
	}
}
