package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/testenv"
)

// The consumers' own check: without rekey, a password changed behind the
// pods' back is refused and counted (with instance and generation), a
// changed Secret is not picked up by running pods, and a pod-template
// restart rolled out by the real Deployment controller makes the new pods
// read it — the three behaviours the matrix relies on.
func TestPodConsumersSeeLockouts(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	keys := map[string]string{"APP_PASSWORD": "app-user", "OTHER_PASSWORD": "other-user"}
	pw := func(gen int) map[string]string {
		return map[string]string{"APP_PASSWORD": fmt.Sprintf("App%dx%s", gen, strings.Repeat("p", 30)),
			"OTHER_PASSWORD": fmt.Sprintf("Other%dx%s", gen, strings.Repeat("q", 30))}
	}
	for k, u := range keys {
		onEachInstance(t, c.Instances(), fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", u, pw(1)[k]))
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-creds",
		Annotations: map[string]string{naming.GenerationAnnotation: "1"}}, StringData: pw(1)}
	if err := k8s.Create(ctxT(t), s); err != nil {
		t.Fatal(err)
	}
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "selfcheck"},
		Spec: v1.CredentialSetSpec{Distribution: []v1.SecretTarget{{Name: "app-creds"}}}}
	pc := deployConsumers(t, cs, keys, c.Instances)
	if len(cs.Spec.Consumers) != 1 || cs.Spec.Consumers[0].Kind != v1.KindDeployment {
		t.Fatalf("consumers not declared in the set: %+v", cs.Spec.Consumers)
	}
	// The lockouts below are the point of this test and are checked here;
	// the consumers' own end-of-test check must not fail it for them.
	pc.lockoutsExpected.Store(true)

	eventually(t, time.Minute, "both pods started and logging in", func() (bool, string) {
		tot := pc.totals()
		return tot.starts == consumerReplicas && tot.attempts >= 20, fmt.Sprintf("%+v", tot)
	})
	if pc.refused.Load() != 0 {
		t.Fatalf("refused with the right passwords:\n%s", refusalLines(pc.refusalsSince(time.Time{})))
	}

	// 1. The password changes on one instance behind the pods' back.
	changed := time.Now()
	onEachInstance(t, c.Replicas[:1], fmt.Sprintf("ALTER USER 'app-user'@'%%' IDENTIFIED BY '%s'", pw(2)["APP_PASSWORD"]))
	eventually(t, 30*time.Second, "refusals counted", func() (bool, string) {
		return pc.refused.Load() >= 4, fmt.Sprint(pc.refused.Load())
	})
	for _, r := range pc.refusalsSince(changed) {
		if r.Instance != c.Replicas[0].Name || r.User != "app-user" || r.Generation != "1" || r.Pod == "" {
			t.Fatalf("refusal recorded as %s, want app-user on %s holding generation 1", r, c.Replicas[0].Name)
		}
		if strings.Contains(r.Error, pw(1)["APP_PASSWORD"]) || strings.Contains(r.Error, pw(2)["APP_PASSWORD"]) {
			t.Fatal("a refusal's error names a password")
		}
	}

	// 2. The Secret changes (everywhere, the password too): running pods
	// keep what they read at start, so the refusals go on.
	onEachInstance(t, c.Instances(), fmt.Sprintf("ALTER USER 'app-user'@'%%' IDENTIFIED BY '%s'", pw(2)["APP_PASSWORD"]))
	s = &corev1.Secret{}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "app-creds"}, s); err != nil {
		t.Fatal(err)
	}
	s.Data["APP_PASSWORD"] = []byte(pw(2)["APP_PASSWORD"])
	s.Annotations[naming.GenerationAnnotation] = "2"
	if err := k8s.Update(ctxT(t), s); err != nil {
		t.Fatal(err)
	}
	before := pc.refused.Load()
	time.Sleep(2 * time.Second)
	if pc.refused.Load() <= before || pc.totals().starts != consumerReplicas {
		t.Fatalf("after the Secret changed without a restart: %d refusals (were %d), %d starts: pods re-read the Secret by themselves",
			pc.refused.Load(), before, pc.totals().starts)
	}

	// 3. A restart through the pod template, as rekey does it: the real
	// Deployment controller replaces both pods, which read generation 2.
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "selfcheck-app"}, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Template.Annotations = map[string]string{"rekey.io/restart-selfcheck": "2"}
	if err := k8s.Patch(ctxT(t), d, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the rollout replaced both pods", func() (bool, string) {
		if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "selfcheck-app"}, d); err != nil {
			return false, err.Error()
		}
		st := d.Status
		return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == consumerReplicas && st.Replicas == consumerReplicas &&
			st.AvailableReplicas == consumerReplicas && pc.totals().starts == 2*consumerReplicas, fmt.Sprintf("%+v starts=%d", st, pc.totals().starts)
	})
	time.Sleep(500 * time.Millisecond) // the old pods' last logins in flight
	settled := pc.refused.Load()
	time.Sleep(2 * time.Second)
	if n := pc.refused.Load(); n != settled {
		t.Fatalf("refused %d more times after the restart: the new pods did not read the new Secret\n%s", n-settled, refusalLines(pc.refusalsSince(changed)))
	}
}
