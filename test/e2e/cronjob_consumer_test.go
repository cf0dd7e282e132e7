package e2e

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCronJobConsumer: a CronJob consumer on the full local control plane,
// where the real CronJob and Job controllers run. Nothing of a CronJob is
// restarted: rekey marks its job template once the new credentials are
// distributed and discards only when no Job started before that mark still
// runs. The Job from before is made as kubectl create job --from=cronjob
// makes it (a Job the CronJob controls but does not list in
// status.active); its pod can never be scheduled, so it runs until the
// test deletes it. The CronJob's own next Job, made by the real CronJob
// controller once the CronJob is resumed, carries the mark.
func TestCronJobConsumer(t *testing.T) {
	full := testenv.FullControlPlaneForTest(t, testenv.ControlPlaneOptions{CRDDirectoryPaths: []string{"config/crd/bases"}})
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	kc, err := client.New(full.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	plain := k8s
	k8s = kc // the helpers talk to this control plane for this test
	t.Cleanup(func() { k8s = plain })
	const ns = "cron"
	for _, n := range []string{OperatorNamespace, ns} {
		if err := kc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	startManager(t, full.Config)

	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "report"},
		Spec: batchv1.CronJobSpec{
			Schedule:          "* * * * *",
			ConcurrencyPolicy: batchv1.ForbidConcurrent,
			// Suspended until the end: a scheduled Job from before the
			// rotation would hold it as the Job from before does.
			Suspend: ptr.To(true),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To(int32(0)),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					// No node has this label: the pod stays Pending and
					// its Job runs until deleted.
					NodeSelector: map[string]string{"rekey.io/test-no-such-node": "true"},
					Containers:   []corev1.Container{{Name: "report", Image: "report:1"}},
				}},
			}},
		},
	}
	if err := kc.Create(ctxT(t), cj); err != nil {
		t.Fatal(err)
	}
	// What kubectl create job --from=cronjob/report does.
	jobFrom := func(name string) *batchv1.Job {
		t.Helper()
		cur := &batchv1.CronJob{}
		if err := kc.Get(ctxT(t), client.ObjectKeyFromObject(cj), cur); err != nil {
			t.Fatal(err)
		}
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				Annotations:     map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cur, batchv1.SchemeGroupVersion.WithKind("CronJob"))}},
			Spec: cur.Spec.JobTemplate.Spec,
		}
		if err := kc.Create(ctxT(t), j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	before := jobFrom("report-before")

	cs := mocoSet(t, ns, "reports", c)
	cs.Spec.Consumers = []v1.ConsumerRef{{Kind: v1.KindCronJob, Name: "report"}}
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout, GracePeriod: &metav1.Duration{Duration: time.Second}}
	if err := kc.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "reports", v1.PhaseIdle, 1)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")

	rotate(t, ns, "reports", "cron-1")
	cs = waitPhase(t, ns, "reports", v1.PhaseDistributed, 1)
	pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	key := naming.RestartAnnotation(cs)

	// The job template is marked; the Job from before holds the discard.
	eventually(t, 2*time.Minute, "the CronJob held by the Job from before", func() (bool, string) {
		cur := getSet(t, ns, "reports")
		if cur.Status.Phase != v1.PhaseDistributed || cur.Status.DiscardStarted || cur.Status.DiscardApplied {
			t.Fatalf("discard went ahead while Job report-before, started with the old credentials, runs: %s", stateOf(cur))
		}
		for _, st := range cur.Status.Consumers {
			if st.Kind == v1.KindCronJob && !st.RolledOut && strings.Contains(st.Message, "Job report-before started before the new credentials") {
				return true, st.Message
			}
		}
		return false, stateOf(cur)
	})
	marked := &batchv1.CronJob{}
	if err := kc.Get(ctxT(t), client.ObjectKeyFromObject(cj), marked); err != nil {
		t.Fatal(err)
	}
	if v := marked.Spec.JobTemplate.Spec.Template.Annotations[key]; !engine.RestartFor(v, "cron-1") {
		t.Fatalf("job template annotation %s = %q, want cron-1's", key, v)
	}
	mustContain(t, "ConsumerRestarted event", waitEvent(t, ns, "reports", string(reason.ConsumerRestarted)), "CronJob cron/report", "next Jobs start with the new credentials")
	loginMatrix(t, "while a Job from before runs", c.Instances(), old, nil)

	// A Job made from the marked template started with the new credentials
	// and holds nothing; the Job from before still does.
	jobFrom("report-after")
	if cur := getSet(t, ns, "reports"); cur.Status.Phase != v1.PhaseDistributed || cur.Status.DiscardApplied {
		t.Fatalf("discard went ahead while Job report-before runs: %s", stateOf(cur))
	}

	// The Job from before ends: rekey sees it within its recheck and the
	// AfterRollout discard follows.
	if err := kc.Delete(ctxT(t), before, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "reports", v1.PhaseIdle, 2)
	loginMatrix(t, "after the Job from before ended", c.Instances(), pend, old)
	if cs.Status.ConsumersUpdated != "1/1" {
		t.Fatalf("consumersUpdated = %q, want 1/1", cs.Status.ConsumersUpdated)
	}

	// The CronJob's next scheduled Job, made by the real CronJob
	// controller once it is resumed, carries the mark (it reads the new
	// credentials).
	resume := &batchv1.CronJob{}
	if err := kc.Get(ctxT(t), client.ObjectKeyFromObject(cj), resume); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(resume.DeepCopy())
	resume.Spec.Suspend = ptr.To(false)
	if err := kc.Patch(ctxT(t), resume, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the CronJob controller's next Job", func() (bool, string) {
		var jobs batchv1.JobList
		if err := kc.List(ctxT(t), &jobs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Items {
			if j.Annotations["cronjob.kubernetes.io/instantiate"] == "manual" {
				continue
			}
			if v := j.Spec.Template.Annotations[key]; !engine.RestartFor(v, "cron-1") {
				t.Fatalf("scheduled Job %s has %s = %q, want cron-1's", j.Name, key, v)
			}
			return true, j.Name
		}
		return false, "no scheduled Job yet"
	})
}
