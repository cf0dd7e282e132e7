package e2e

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
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

// TestRolloutGate runs in the full local control plane, where the real
// StatefulSet controller rolls rekey's restart annotation through pods that
// kwok makes ready slowly: discard must wait while the consumer is mid-
// rollout and go ahead by itself once it completes.
func TestRolloutGate(t *testing.T) {
	full := testenv.FullControlPlaneForTest(t, testenv.ControlPlaneOptions{CRDDirectoryPaths: []string{"config/crd/bases"}})
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	kc, err := client.New(full.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	plain := k8s
	k8s = kc // the helpers talk to this control plane for this test
	t.Cleanup(func() { k8s = plain })
	for _, ns := range []string{OperatorNamespace, "gate"} {
		if err := kc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	startManager(t, full.Config)

	labels := map[string]string{"app": "consumer"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gate", Name: "consumer"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(3)), ServiceName: "consumer",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				// Every new pod takes 3 s to become ready, as a slow
				// readiness probe would: long enough to catch the rollout.
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{testenv.ReadyDelayAnnotation: "3s"}},
				Spec: corev1.PodSpec{
					NodeName:   full.NodeName,
					Containers: []corev1.Container{{Name: "app", Image: "app:1"}},
				},
			},
		},
	}
	if err := kc.Create(ctxT(t), sts); err != nil {
		t.Fatal(err)
	}
	cs := mocoSet(t, "gate", "gated", c)
	cs.Spec.Consumers = []v1.ConsumerRef{{Kind: v1.KindStatefulSet, Name: "consumer"}}
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout, GracePeriod: &metav1.Duration{Duration: time.Second}}
	if err := kc.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, "gate", "gated", v1.PhaseIdle, 1)
	eventually(t, 2*time.Minute, "consumer ready before the rotation", func() (bool, string) {
		s := getSTS(t, kc)
		return engine.StatefulSetRollout(s).Done, engine.StatefulSetRollout(s).Message
	})
	old := userPasswords(sourceData(t, cs), mocoKeys, "")

	rotate(t, "gate", "gated", "gate-1")
	cs = waitPhase(t, "gate", "gated", v1.PhaseDistributed, 1)
	pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)

	// The restart annotation reaches the pod template, and while the real
	// StatefulSet controller rolls it through, discard is held.
	key := naming.RestartAnnotation(cs)
	sawHeld := false
	eventually(t, 2*time.Minute, "rollout of the restart annotation", func() (bool, string) {
		s := getSTS(t, kc)
		if !engine.RestartFor(s.Spec.Template.Annotations[key], "gate-1") {
			return false, "template lacks the restart annotation"
		}
		ro := engine.StatefulSetRollout(s)
		if !ro.Done {
			cur := getSet(t, "gate", "gated")
			if cur.Status.Phase == v1.PhaseDistributed && !cur.Status.DiscardApplied {
				if rc := condition(cur, reason.CondRolloutComplete); rc != nil && rc.Status == "False" {
					sawHeld = true
				}
			} else {
				t.Fatalf("discard went ahead mid-rollout (%s): %s", ro.Message, stateOf(cur))
			}
			// Old passwords must still work while pods run the old ones.
			loginMatrix(t, "mid-rollout", c.Instances(), old, nil)
		}
		return ro.Done, ro.Message
	})
	if !sawHeld {
		t.Fatal("never observed the set held while the consumer was mid-rollout")
	}
	// AfterRollout: discard by itself once the rollout completed and the
	// grace period passed.
	cs = waitPhase(t, "gate", "gated", v1.PhaseIdle, 2)
	loginMatrix(t, "after the gated discard", c.Instances(), pend, old)
	if rc := condition(cs, reason.CondRolloutComplete); rc == nil || rc.Status != "True" {
		t.Fatalf("RolloutComplete after completion: %+v", rc)
	}
	if cs.Status.ConsumersUpdated != "1/1" {
		t.Fatalf("consumersUpdated = %q, want 1/1", cs.Status.ConsumersUpdated)
	}
	note := waitEvent(t, "gate", "gated", string(reason.DiscardApplied))
	mustContain(t, "DiscardApplied event", note, "AfterRollout")
	// Completion must not restart the consumer again (stable annotation).
	gen := getSTS(t, kc).Generation
	time.Sleep(2 * time.Second)
	if s := getSTS(t, kc); s.Generation != gen || !engine.RestartFor(s.Spec.Template.Annotations[key], "gate-1") {
		t.Fatalf("the consumer was changed after completion (generation %d → %d)", gen, s.Generation)
	}

	// A partition keeps pods below it on the old template, and so on the
	// old passwords: kubectl calls that rollout finished, rekey must not.
	// It waits, says the rollout is stuck and how to finish it, and goes on
	// once the partition is lowered.
	setPartition := func(p int32) {
		s := getSTS(t, kc)
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(p)}
		if err := kc.Update(ctxT(t), s); err != nil {
			t.Fatal(err)
		}
	}
	setPartition(2)
	old, pend = pend, nil
	rotate(t, "gate", "gated", "gate-2")
	cs = waitPhase(t, "gate", "gated", v1.PhaseDistributed, 2)
	pend = userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	mustContain(t, "RolloutStuck event", waitEvent(t, "gate", "gated", string(reason.RolloutStuck)), "StatefulSet gate/consumer", "partition 2", "lower the partition to 0")
	mustContain(t, "Degraded condition", waitDegraded(t, "gate", "gated", reason.RolloutStuck), "partition 2")
	if cur := getSet(t, "gate", "gated"); cur.Status.Phase != v1.PhaseDistributed || cur.Status.DiscardStarted || cur.Status.DiscardApplied {
		t.Fatalf("discard went ahead with pods left on the old template: %s", stateOf(cur))
	}
	loginMatrix(t, "while the partition holds pods back", c.Instances(), old, nil)
	setPartition(0)
	cs = waitPhase(t, "gate", "gated", v1.PhaseIdle, 3)
	loginMatrix(t, "after the partition was lowered", c.Instances(), pend, old)
	eventually(t, 30*time.Second, "Degraded cleared", func() (bool, string) {
		d := condition(getSet(t, "gate", "gated"), reason.CondDegraded)
		return d != nil && d.Status == "False", condSummary(getSet(t, "gate", "gated"))
	})
}

func getSTS(t testing.TB, kc client.Client) *appsv1.StatefulSet {
	t.Helper()
	s := &appsv1.StatefulSet{}
	if err := kc.Get(context.Background(), client.ObjectKey{Namespace: "gate", Name: "consumer"}, s); err != nil {
		t.Fatal(err)
	}
	return s
}
