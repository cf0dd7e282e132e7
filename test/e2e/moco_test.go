package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mocokube"
	"rekey.io/rekey/internal/backend/mysqlkube"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/moco"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestMOCOSystemUsers rotates MOCO's 8 system users of a MySQLCluster
// named in mysql.moco, on MOCO's real CRD with MOCO's Secrets and
// StatefulSet made as MOCO makes them, and 3 real mysqld. The real MOCO
// controller does not run here (docs/moco.md says why); its parts that
// read passwords are played: its clustering loop re-reads the user Secret
// before each login (the prober), its agents and mysqld read it once at
// pod start (the StatefulSet's pods, rolled by the real StatefulSet
// controller), its reconcile re-applies the cluster's Secrets from the
// controller Secret every 100 ms. An application Deployment reads the
// user Secret at start too.
func TestMOCOSystemUsers(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	installMOCOCRDs(t)
	ns := newNamespace(t)
	if err := k8s.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mocoSystemNS}}); err != nil {
		t.Fatal(err)
	}
	f := newMOCOFixture(t, ns, "shop", c)
	addrs := map[string]string{}
	for n, i := range c.Instances() {
		addrs[fmt.Sprintf("moco-shop-%d.moco-shop.%s.svc:3306", n, ns)] = i.Addr()
	}
	startManager(t, cp.Config, func(r *controller.Reconciler) {
		r.AddressMap = func(a string) string { return addrs[a] }
		r.Settings.Set(mysqlkube.FlagMOCONamespace, mocoSystemNS)
	})
	agents := startPodConsumers(t, k8s, cp, ns, "moco-shop", mocoKeys, c.Instances)
	registerConsumers(t, agents)
	app := mocoApp(t, ns, "shop-app", "moco-shop")
	registerConsumers(t, startPodConsumers(t, k8s, cp, ns, app, mocoKeys, c.Instances))

	// The README's example, with the test's CA (the instances' certificate
	// names localhost, their DNS names being mapped onto local ports).
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco"},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{MOCO: &v1.MOCOSpec{ClusterName: "shop"},
				TLSCASecretRef: mysqlCASecret(t, ns, "shop-ca"), TLSServerName: testenv.MySQLTLSName},
			Consumers: []v1.ConsumerRef{{Kind: v1.KindStatefulSet, Name: "moco-shop"}, {Kind: v1.KindDeployment, Name: app}},
		},
	}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "moco", v1.PhaseIdle, 1)
	gen1 := map[string]string{}
	for k, u := range mocoKeys {
		gen1[u] = f.passwords[k]
	}
	if got := userPasswords(sourceData(t, cs), mocoKeys, ""); !equalMaps(got, gen1) {
		t.Fatal("the source Secret does not hold MOCO's 8 passwords as adopted")
	}
	assertMOCOReads(t, f, gen1)
	loginMatrix(t, "after adoption", c.Instances(), gen1, nil)
	if uid := secretAnnotation(t, mocoSystemNS, "mysql-"+ns+".shop", mocokube.ClaimAnnotation); uid != string(cs.UID) {
		t.Fatalf("MOCO's controller Secret is claimed by %q, want the set's UID", uid)
	}
	// MOCO's controller: re-reads the user Secret before every login.
	p := startProber(t, c.Instances(), ns, "moco-shop", mocoKeys)

	// The health gate: MOCO reports the cluster unhealthy, nothing starts.
	f.setHealthy(t, false)
	rotate(t, ns, "moco", "rot-1")
	msg := waitDegraded(t, ns, "moco", reason.ClusterUnhealthy)
	if !strings.Contains(msg, "Healthy=False") {
		t.Fatalf("the refusal does not name MOCO's condition: %s", msg)
	}
	if cs = getSet(t, ns, "moco"); cs.Status.Phase != v1.PhaseIdle || cs.Status.RotationID != "" {
		t.Fatalf("a rotation started on a cluster MOCO reports unhealthy: %s", stateOf(cs))
	}
	loginMatrix(t, "held by the health gate", c.Instances(), gen1, nil)
	f.setHealthy(t, true)

	cs = waitPhase(t, ns, "moco", v1.PhaseDistributed, 1)
	pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	if len(pend) != 8 {
		t.Fatalf("%d pending passwords", len(pend))
	}
	assertMOCOReads(t, f, pend)
	loginMatrix(t, "Distributed: new", c.Instances(), pend, nil)
	loginMatrix(t, "Distributed: old", c.Instances(), gen1, nil)

	// A switchover as MOCO's clustering loop makes one (its steps on
	// mysqld, then status.currentPrimaryIndex), between the phases, while
	// every reader keeps logging in.
	oldPrimary, newPrimary, other := c.Primary, c.Replicas[0], c.Replicas[1]
	if err := testenv.Switchover(oldPrimary, newPrimary, other); err != nil {
		t.Fatal(err)
	}
	f.setPrimary(t, 1)

	// A backup Job started before the rotation holds the old
	// BACKUP_PASSWORD: the discard waits for it.
	job := mocoBackupJob(t, ns, "shop")
	discard(t, ns, "moco", "rot-1")
	if msg := waitDegraded(t, ns, "moco", reason.DiscardRefused); !strings.Contains(msg, "backup Job "+ns+"/"+job.Name) {
		t.Fatalf("the held discard does not name the backup Job: %s", msg)
	}
	loginMatrix(t, "discard held by a backup", c.Instances(), gen1, nil)
	if err := k8s.Delete(ctxT(t), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "moco", v1.PhaseIdle, 2)
	assertMOCOReads(t, f, pend)
	loginMatrix(t, "Idle after discard", c.Instances(), pend, gen1)
	for _, s := range cs.Status.Consumers {
		if !s.RolledOut {
			t.Fatalf("consumer %s/%s not rolled out at Idle", s.Kind, s.Name)
		}
	}
	p.assertNoGap(t)
	assertSuperReadOnly(t, oldPrimary, other)
	if v, err := newPrimary.QueryString("SELECT @@GLOBAL.super_read_only"); err != nil || v != "0" {
		t.Fatalf("the new primary is super_read_only=%q (%v) after the discard", v, err)
	}
	assertNoSecretLeaked(t, ns, "moco", gen1, pend)
	t.Logf("MOCO %s: 8 system users adopted from MOCO's controller Secret, rotated and discarded; MOCO's 3 Secrets hold the new passwords in MOCO's form", moco.Version)
}

// assertMOCOReads: every Secret MOCO and its pods read holds want (user →
// password), the my.cnf entries included.
func assertMOCOReads(t testing.TB, f *mocoFixture, want map[string]string) {
	t.Helper()
	eventually(t, 30*time.Second, "MOCO's Secrets hold the expected passwords", func() (bool, string) {
		for which, got := range f.secretsMOCOReads(t) {
			for u, pw := range got {
				if want[u] != pw {
					return false, which + " Secret: " + u + " differs"
				}
			}
			if which != "my.cnf" && len(got) != 8 || which == "my.cnf" && len(got) != 5 {
				return false, fmt.Sprintf("%s Secret holds %d passwords", which, len(got))
			}
		}
		return true, ""
	})
	observed(t, "MOCO's controller, user and my.cnf Secrets hold the expected passwords")
}

func secretAnnotation(t testing.TB, ns, name, key string) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s.Annotations[key]
}

// mocoApp is an application Deployment reading secret (envFrom) at start.
func mocoApp(t testing.TB, ns, name, secret string) string {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(consumerReplicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeName: cp.NodeName, Containers: []corev1.Container{{Name: "app", Image: consumerImage,
					EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}}}}},
			},
		},
	}
	if err := k8s.Create(ctxT(t), d); err != nil {
		t.Fatal(err)
	}
	return name
}

// mocoBackupJob is an active Job of MOCO's backup CronJob for cluster (a
// suspended CronJob, so that only this Job exists), its pod reading
// BACKUP_PASSWORD as MOCO's backup container does. The pod stays Pending
// (no node matches): kwok completes a Job's pods at once, and the Job
// counts a Pending pod as active all the same.
func mocoBackupJob(t testing.TB, ns, cluster string) *batchv1.Job {
	t.Helper()
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"rekey.io/test": "no-such-node"}, RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "backup", Image: "ghcr.io/cybozu-go/moco-backup:0.36.0", Env: []corev1.EnvVar{{Name: "MYSQL_PASSWORD",
			ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "moco-" + cluster}, Key: "BACKUP_PASSWORD"}}}}}}}}
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco-backup-" + cluster},
		Spec: batchv1.CronJobSpec{Schedule: "@daily", Suspend: ptr.To(true), JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}
	if err := k8s.Create(ctxT(t), cj); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cj.Name + "-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID, Controller: ptr.To(true)}}},
		Spec: batchv1.JobSpec{Template: tmpl}}
	if err := k8s.Create(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the backup Job active", func() (bool, string) {
		if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(job), job); err != nil {
			return false, err.Error()
		}
		return job.Status.Active > 0, fmt.Sprintf("active %d", job.Status.Active)
	})
	return job
}
