package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mysqlkube"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestMOCOPacedRollout rotates MOCO's system users beside MOCO's own
// code: moco-harness runs MOCO v0.36.0's MySQLCluster reconciler (it makes
// the Secrets and the StatefulSet from the MySQLCluster), its partition
// controller and its admission webhooks, from MOCO's Go module, on a real
// API server with kube-controller-manager and kwok; only MOCO's
// clustering loop is played (Healthy from the pods' readiness), as MOCO
// v0.36 refuses the MySQL 9.x the tests run. rekey's restart of the
// StatefulSet is partitioned by MOCO's webhook and rolled one pod at a
// time by MOCO's partition controller while the cluster is Healthy: rekey
// waits and reports progress, never RolloutStuck, and the rotation
// completes through it with no refused login. Then the cluster turns
// unhealthy mid-rollout for longer than rotation.stuckAfter: the stall is
// reported, with advice that keeps MOCO's gate, and the rollout and the
// rotation finish by themselves once MOCO reports it Healthy again.
func TestMOCOPacedRollout(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	installMOCOCRDs(t)
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{env.MOCOPlayedCRDs()}, ErrorIfPathMissing: true,
		MaxTime: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mocoSystemNS}}); err != nil {
		t.Fatal(err)
	}
	harness, err := env.StartMOCOHarness(cp, mocoSystemNS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("moco-harness log: %s", harness.LogPath)
		}
	})
	ns := newNamespace(t)
	mc := mocoCluster(t, ns, "shop")

	// What MOCO's reconciler made: the controller Secret with MOCO's own
	// generated passwords, copied to the cluster's Secrets; the
	// StatefulSet, partitioned by MOCO's webhook at creation.
	var gen1 map[string]string
	eventually(t, 2*time.Minute, "MOCO's reconciler made the Secrets and the StatefulSet", func() (bool, string) {
		s := &corev1.Secret{}
		if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "moco-shop"}, s); err != nil {
			return false, err.Error()
		}
		gen1 = userPasswords(s.Data, mocoKeys, "")
		sts := &appsv1.StatefulSet{}
		if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "moco-shop"}, sts); err != nil {
			return false, err.Error()
		}
		return len(gen1) == 8, fmt.Sprintf("%d passwords", len(gen1))
	})
	// moco-agent's initialisation, played: the 8 users with MOCO's
	// passwords on every instance.
	var stmts []string
	for _, u := range mocoKeys {
		stmts = append(stmts, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", u, gen1[u]))
	}
	onEachInstance(t, c.Instances(), append(stmts, "GRANT ALL PRIVILEGES ON *.* TO 'moco-admin'@'%' WITH GRANT OPTION")...)
	waitMOCOHealthy(t, ns, "shop", true)
	eventually(t, 2*time.Minute, "MOCO's partition controller lowered the partition its webhook set at creation to 0", func() (bool, string) {
		sts := &appsv1.StatefulSet{}
		if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "moco-shop"}, sts); err != nil {
			return false, err.Error()
		}
		ru := sts.Spec.UpdateStrategy.RollingUpdate
		return ru != nil && ru.Partition != nil && *ru.Partition == 0, fmt.Sprintf("%+v", ru)
	})

	addrs := map[string]string{}
	for n, i := range c.Instances() {
		addrs[fmt.Sprintf("moco-shop-%d.moco-shop.%s.svc:3306", n, ns)] = i.Addr()
	}
	startManager(t, cp.Config, func(r *controller.Reconciler) {
		r.AddressMap = func(a string) string { return addrs[a] }
		r.Settings.Set(mysqlkube.FlagMOCONamespace, mocoSystemNS)
	})
	// moco-agent and mysqld, played by the StatefulSet's pods: they read
	// MOCO's user Secret when they start.
	agents := startPodConsumers(t, k8s, cp, ns, "moco-shop", mocoKeys, c.Instances)
	registerConsumers(t, agents)

	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco"},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{MOCO: &v1.MOCOSpec{ClusterName: "shop"},
				TLSCASecretRef: mysqlCASecret(t, ns, "shop-ca"), TLSServerName: testenv.MySQLTLSName},
			Consumers: []v1.ConsumerRef{{Kind: v1.KindStatefulSet, Name: "moco-shop"}},
			Rotation:  v1.RotationSpec{StuckAfter: &metav1.Duration{Duration: 20 * time.Second}},
		},
	}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "moco", v1.PhaseIdle, 1)
	checkMOCOSecrets(t, ns, "shop", gen1, "Idle at generation 1")
	w := watchPacing(t, ns, "moco", "moco-shop", "shop")

	// 1. A healthy, MOCO-paced rollout.
	rotate(t, ns, "moco", "rot-1")
	cs = waitPhase(t, ns, "moco", v1.PhaseDistributed, 1)
	pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	checkMOCOSecrets(t, ns, "shop", pend, "Distributed")
	discard(t, ns, "moco", "rot-1")
	cs = waitPhase(t, ns, "moco", v1.PhaseIdle, 2)
	checkMOCOSecrets(t, ns, "shop", pend, "Idle at generation 2")
	healthy := w.snapshot()
	t.Logf("healthy rollout: StatefulSet partitions seen %v; MySQLCluster updates with ReconcileSuccess=True %d; consumer messages seen: %q",
		healthy.partitions, healthy.reconciled, healthy.messages)
	if len(healthy.stuck) > 0 {
		t.Fatalf("RolloutStuck reported during MOCO's healthy rollout: %q", healthy.stuck)
	}
	assertMOCOPaced(t, healthy)
	assertMOCOReads(t, &mocoFixture{ns: ns, name: "shop"}, pend)
	loginMatrix(t, "Idle after the paced rollout", c.Instances(), pend, gen1)

	// 2. MOCO reports the cluster unhealthy mid-rollout, longer than
	// stuckAfter: a stall, reported with advice that keeps MOCO's gate.
	w.reset()
	rotate(t, ns, "moco", "rot-2")
	cs = waitPhase(t, ns, "moco", v1.PhaseDistributed, 2)
	gen2, pend2 := pend, userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	setMOCOState(t, mc, "Degraded")
	waitMOCOHealthy(t, ns, "shop", false)
	msg := waitDegraded(t, ns, "moco", reason.RolloutStuck)
	mustContain(t, "the stalled rollout's message", msg, "paced by MOCO", "Healthy=False (reason Degraded)", "rotation.stuckAfter", "Do not lower the partition by hand")
	if strings.Contains(msg, "lower the partition to 0") {
		t.Fatalf("the stall advises bypassing MOCO's health gate: %s", msg)
	}
	loginMatrix(t, "stalled: old still valid", c.Instances(), gen2, nil)
	setMOCOState(t, mc, "")
	discard(t, ns, "moco", "rot-2")
	waitPhase(t, ns, "moco", v1.PhaseIdle, 3)
	assertMOCOPaced(t, w.snapshot())
	assertMOCOReads(t, &mocoFixture{ns: ns, name: "shop"}, pend2)
	loginMatrix(t, "Idle after the stall healed", c.Instances(), pend2, gen2)
	assertNoSecretLeaked(t, ns, "moco", gen1, pend, pend2)
}

// mocoCluster creates a MySQLCluster for MOCO's reconciler: 3 instances,
// its pods labelled app=moco-<name> (the test plays them as consumers)
// and bound to the fake node (no volume is provisioned here, so the
// scheduler would not place them), annotated with podAnnotations (each
// set to "true").
func mocoCluster(t testing.TB, ns, name string, podAnnotations ...string) *unstructured.Unstructured {
	t.Helper()
	ann := map[string]any{}
	for _, a := range podAnnotations {
		ann[a] = "true"
	}
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"replicas": int64(3),
			"podTemplate": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "moco-" + name}, "annotations": ann},
				"spec": map[string]any{"nodeName": cp.NodeName,
					"containers": []any{map[string]any{"name": "mysqld", "image": "ghcr.io/cybozu-go/moco/mysql:8.4.5"}}}},
			"volumeClaimTemplates": []any{map[string]any{"metadata": map[string]any{"name": "mysql-data"},
				"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}},
		},
	}}
	if err := k8s.Create(ctxT(t), mc); err != nil {
		t.Fatal(err)
	}
	return mc
}

// setMOCOState makes the played clustering loop report state ("" : the
// state it reads from the pods).
func setMOCOState(t testing.TB, mc *unstructured.Unstructured, state string) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"moco-harness.rekey.io/state":null}}}`)
	if state != "" {
		patch = []byte(fmt.Sprintf(`{"metadata":{"annotations":{"moco-harness.rekey.io/state":%q}}}`, state))
	}
	if err := k8s.Patch(ctxT(t), mc.DeepCopy(), client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

func waitMOCOHealthy(t testing.TB, ns, name string, want bool) {
	t.Helper()
	eventually(t, 2*time.Minute, fmt.Sprintf("MOCO reports MySQLCluster %s Healthy=%v", name, want), func() (bool, string) {
		mc := &unstructured.Unstructured{}
		mc.SetAPIVersion("moco.cybozu.com/v1beta2")
		mc.SetKind("MySQLCluster")
		if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: name}, mc); err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == "Healthy" {
				return (cm["status"] == "True") == want, fmt.Sprint(cm)
			}
		}
		return false, "no Healthy condition"
	})
}

// pacing is what a watch of the rollout saw: the StatefulSet's partitions
// in the order they came, the set's consumer messages, and every
// RolloutStuck message.
type pacing struct {
	partitions []int32
	messages   []string
	stuck      []string
	// MOCO's reconciler re-reads the controller Secret rekey writes with
	// its own password.NewMySQLPasswordFromSecret on every reconcile and
	// writes the user and my.cnf Secrets from it: its ReconcileSuccess
	// condition, how many distinct ones were True, and every False one.
	reconciled  int
	mocoRefused []string
}

type pacingWatch struct {
	mu sync.Mutex
	pacing
}

func (w *pacingWatch) snapshot() pacing {
	w.mu.Lock()
	defer w.mu.Unlock()
	return pacing{slices.Clone(w.partitions), slices.Clone(w.messages), slices.Clone(w.stuck), w.reconciled, slices.Clone(w.mocoRefused)}
}

func (w *pacingWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pacing = pacing{}
}

// watchPacing samples the StatefulSet, the set and MOCO's MySQLCluster
// (named as the set) until the test ends.
// It records, it does not wait: the assertions read what it saw.
func watchPacing(t testing.TB, ns, set, sts, cluster string) *pacingWatch {
	w := &pacingWatch{}
	lastReconcile := ""
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			s := &appsv1.StatefulSet{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: sts}, s); err == nil {
				p := int32(-1)
				if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil {
					p = ptr.Deref(ru.Partition, -1)
				}
				w.mu.Lock()
				if n := len(w.partitions); n == 0 || w.partitions[n-1] != p {
					w.partitions = append(w.partitions, p)
				}
				w.mu.Unlock()
			}
			cs := &v1.CredentialSet{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: set}, cs); err == nil {
				w.mu.Lock()
				for _, c := range cs.Status.Consumers {
					if c.Message != "" && !slices.Contains(w.messages, c.Message) {
						w.messages = append(w.messages, c.Message)
					}
				}
				if d := condition(cs, reason.CondDegraded); d != nil && d.Status == metav1.ConditionTrue && d.Reason == string(reason.RolloutStuck) &&
					!slices.Contains(w.stuck, d.Message) {
					w.stuck = append(w.stuck, d.Message)
				}
				w.mu.Unlock()
			}
			mc := &unstructured.Unstructured{}
			mc.SetAPIVersion("moco.cybozu.com/v1beta2")
			mc.SetKind("MySQLCluster")
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, mc); err == nil {
				conds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
				for _, c := range conds {
					cm, _ := c.(map[string]any)
					if cm["type"] != "ReconcileSuccess" {
						continue
					}
					seen := fmt.Sprint(cm["status"], cm["lastTransitionTime"], mc.GetResourceVersion())
					w.mu.Lock()
					if cm["status"] != "True" {
						w.mocoRefused = append(w.mocoRefused, fmt.Sprint(cm["reason"], ": ", cm["message"]))
					} else if seen != lastReconcile {
						w.reconciled++
					}
					w.mu.Unlock()
					lastReconcile = seen
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// assertMOCOPaced: MOCO's webhook partitioned rekey's restart (partition
// 3, the replicas) and MOCO's partition controller lowered it step by
// step to 0, while rekey reported the progress as paced by MOCO.
func assertMOCOPaced(t testing.TB, p pacing) {
	t.Helper()
	i := len(p.partitions) - 1
	for i >= 0 && p.partitions[i] != 3 {
		i--
	}
	if i < 0 || !slices.Equal(p.partitions[i:], []int32{3, 2, 1, 0}) {
		t.Fatalf("StatefulSet partitions %v: want MOCO's webhook to set 3 and its partition controller to lower it 3, 2, 1, 0", p.partitions)
	}
	paced := slices.ContainsFunc(p.messages, func(m string) bool { return strings.Contains(m, "paced by MOCO") })
	if !paced {
		t.Fatalf("rekey never reported the rollout as paced by MOCO: %q", p.messages)
	}
	if len(p.mocoRefused) > 0 || p.reconciled == 0 {
		t.Fatalf("MOCO's reconciler did not accept the Secrets rekey wrote: %d successful status samples, failures %q", p.reconciled, p.mocoRefused)
	}
	observed(t, "MOCO partitioned rekey's restart and paced it 3, 2, 1, 0; rekey reported it paced by MOCO; MOCO's reconciler kept reporting ReconcileSuccess")
}
