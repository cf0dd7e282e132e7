package e2e

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// Consumers that behave like pods (issue 14). The matrix's prober re-reads
// the newest Secret before every login, so it cannot see a consumer that
// keeps an old password: real pods read a Secret once, when their container
// starts (envFrom, a file read at boot), and keep what they read until they
// are restarted — by the rollout rekey triggers, or not at all.
//
// So every fault scenario runs on a control plane where Deployments really
// roll out (kube-controller-manager's Deployment and ReplicaSet controllers,
// kwok as the kubelet of a fake node: testenv.ControlPlaneOptions.Full), and
// declares a Deployment of consumerReplicas pods in the set's
// spec.consumers. kwok runs no container, so the test plays each pod's
// process: when a pod is bound to the node, its "container" starts — it
// reads the Secret its pod spec names in envFrom, once — and from then on
// logs in to every instance with what it read, until the pod is deleted.
// rekey restarts the pods by patching the Deployment's pod template; the
// real Deployment controller replaces them; the new ones read the Secret
// again. Nothing here moves a pod or re-reads a Secret on its own.
//
// Every login the server refuses (MySQL: access denied; PostgreSQL: a
// refused password or role — see consumerWay) is a lockout: it is kept with
// its time, pod, user, instance and the generation the pod read, counted in
// the matrix row of the scenario running, and fails that scenario. An
// instance that does not answer (stopped on purpose) is not a refusal.

const (
	consumerReplicas = 2
	// consumerLoginEvery: each pod logs in once per instance per tick, as
	// the next of the Secret's users in turn (8 for the moco preset), so a
	// user is tried on every instance every 0.8 s per pod. Cheap enough for
	// 2 shared cores, and a lockout lasts until a restart, not milliseconds.
	consumerLoginEvery = 100 * time.Millisecond
	// consumerImage is never pulled: kwok only pretends to run it.
	consumerImage = "rekey.io/test-consumer:1"
	// consumerKeptRefusals: details kept per Deployment (the count is
	// exact); a row shows the first rowRefusals of its own.
	consumerKeptRefusals = 5000
	rowRefusals          = 10
)

// podConsumers is one consumer Deployment and the pods the test plays.
type podConsumers struct {
	t    testing.TB
	c    client.Client
	ns   string
	name string // the Deployment
	way  consumerWay

	attempts, refused, unanswered, starts atomic.Int64
	refusedTerminating                    atomic.Int64 // refused after SIGTERM: not lockouts (terminatedBy)
	lockoutsExpected                      atomic.Bool  // only the consumers' self-check

	mu       sync.Mutex
	pods     map[types.UID]*simPod
	refusals []consumerRefusal // the first consumerKeptRefusals, in order
	wg       sync.WaitGroup
	stopped  bool
}

// simPod is the process of one pod: what it read when it started.
type simPod struct {
	name       string
	generation string // rekey.io/key-generation on the Secret it read
	hash       string // rekey.io/secret-hash on it (a digest of set, generation and rotation; not secret)
	stop       chan struct{}
}

// consumerRefusal is one login MySQL refused. Nothing in it is secret.
type consumerRefusal struct {
	At         time.Time `json:"at"`
	Deployment string    `json:"deployment"`
	Pod        string    `json:"pod"`
	User       string    `json:"user"`
	Instance   string    `json:"instance"`
	Generation string    `json:"generation"` // what the pod read at its start
	SecretHash string    `json:"secretHash"`
	Error      string    `json:"error"`
}

func (r consumerRefusal) String() string {
	return fmt.Sprintf("%s %s (Deployment %s) as %s on %s, holding generation %s (secret-hash %s): %s",
		r.At.Format("15:04:05.000"), r.Pod, r.Deployment, r.User, r.Instance, r.Generation, r.SecretHash, r.Error)
}

// consumerTotals are a Deployment's counters at one instant.
type consumerTotals struct{ attempts, refused, starts, refusedTerminating int64 }

func (pc *podConsumers) totals() consumerTotals {
	return consumerTotals{pc.attempts.Load(), pc.refused.Load(), pc.starts.Load(), pc.refusedTerminating.Load()}
}

// refusalsSince returns the first rowRefusals kept refusals from t on.
func (pc *podConsumers) refusalsSince(t time.Time) []consumerRefusal {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	var out []consumerRefusal
	for _, r := range pc.refusals {
		if !r.At.Before(t) && len(out) < rowRefusals {
			out = append(out, r)
		}
	}
	return out
}

// deployConsumers declares Deployment <set>-app (consumerReplicas pods,
// envFrom the set's first distribution Secret) in cs.Spec.Consumers and
// creates it, with the pods played as described above, logging in to MySQL
// (keys: Secret key → user). Call it before the
// set is created: the pods then wait for the Secret, as a kubelet retries a
// container whose envFrom Secret does not exist yet. targets are the
// instances a pod logs in to (a cluster manager routes consumers only to
// instances that serve). The consumers run until the test ends; every
// matrix scenario of the test counts their logins.
func deployConsumers(t *testing.T, cs *v1.CredentialSet, keys map[string]string, targets func() []*testenv.MySQLInstance) *podConsumers {
	t.Helper()
	return deployConsumersWay(t, cs, mysqlWay(keys, targets))
}

// deployConsumersWay is deployConsumers for any backend: way says how a
// pod takes its logins from the Secret and logs in.
func deployConsumersWay(t *testing.T, cs *v1.CredentialSet, way consumerWay) *podConsumers {
	t.Helper()
	if len(cs.Spec.Distribution) == 0 {
		t.Fatal("deployConsumers: the set distributes no Secret")
	}
	return deployConsumersOf(t, cs, cs.Name+"-app", cs.Spec.Distribution[0].Name, way)
}

// deployConsumersOf declares and creates Deployment name, whose pods read
// Secret secret (one of the set's targets) as deployConsumers describes.
func deployConsumersOf(t *testing.T, cs *v1.CredentialSet, name, secret string, way consumerWay) *podConsumers {
	t.Helper()
	if cs.ResourceVersion != "" {
		t.Fatal("deployConsumers: declare the consumers before creating the set")
	}
	if rolloutCP == nil || cp != rolloutCP {
		t.Fatal("deployConsumers: the test runs on a control plane without a Deployment controller (use matrixCluster)")
	}
	cs.Spec.Consumers = append(cs.Spec.Consumers, v1.ConsumerRef{Kind: v1.KindDeployment, Name: name})
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: cs.Namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(consumerReplicas)),
			// Every new pod at once, the old ones removed when the new are
			// available: the rollout takes one step, so a scenario waits
			// for the rollout gate no longer than it must. Slow rollouts
			// are TestRolloutGate's.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromString("100%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// Bound at creation: no scheduling delay, and the
					// kubelet (kwok) takes it at once.
					NodeName: cp.NodeName,
					Containers: []corev1.Container{{
						Name: "app", Image: consumerImage,
						EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}},
					}},
				},
			},
		},
	}
	if err := k8s.Create(ctxT(t), d); err != nil {
		t.Fatal(err)
	}
	pc := startPodConsumersWay(t, k8s, cp, cs.Namespace, name, way)
	registerConsumers(t, pc)
	return pc
}

// startPodConsumers plays the pods of Deployment ns/name, logging in to
// MySQL, until the test ends.
func startPodConsumers(t testing.TB, c client.Client, plane *testenv.ControlPlane, ns, name string,
	keys map[string]string, targets func() []*testenv.MySQLInstance) *podConsumers {
	return startPodConsumersWay(t, c, plane, ns, name, mysqlWay(keys, targets))
}

func startPodConsumersWay(t testing.TB, c client.Client, plane *testenv.ControlPlane, ns, name string, way consumerWay) *podConsumers {
	pc := &podConsumers{t: t, c: c, ns: ns, name: name, way: way, pods: map[types.UID]*simPod{}}

	factory := informers.NewSharedInformerFactoryWithOptions(plane.Clientset(), 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app=" + name }))
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { pc.observe(obj) },
		UpdateFunc: func(_, obj any) { pc.observe(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				pc.terminate(p.UID)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
		pc.halt()
		t.Logf("consumers %s: %d pod starts, %d logins, %d refused, %d to an instance that did not answer, %d refused after the pod's deletion was requested",
			name, pc.starts.Load(), pc.attempts.Load(), pc.refused.Load(), pc.unanswered.Load(), pc.refusedTerminating.Load())
		if pc.attempts.Load() == 0 {
			t.Errorf("consumers %s made no login: the pods never started", name)
		}
		if n := pc.refused.Load(); n > 0 && !pc.lockoutsExpected.Load() {
			t.Errorf("consumers %s were locked out %d times; first:\n%s", name, n, refusalLines(pc.refusalsSince(time.Time{})))
		}
	})
	return pc
}

// observe starts a pod's process when the pod is bound to the node (when a
// kubelet would start its containers), and ends it when the pod is being
// deleted: the kubelet sends SIGTERM, and kwok deletes pods at once.
func (pc *podConsumers) observe(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if p.DeletionTimestamp != nil {
		pc.terminate(p.UID)
		return
	}
	if p.Spec.NodeName == "" {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if _, seen := pc.pods[p.UID]; seen || pc.stopped {
		return // a pod's container starts once: no restart in place here
	}
	secret := ""
	for _, c := range p.Spec.Containers {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				secret = e.SecretRef.Name
			}
		}
	}
	sp := &simPod{name: p.Name, stop: make(chan struct{})}
	pc.pods[p.UID] = sp
	pc.wg.Add(1)
	go pc.run(sp, secret)
}

func (pc *podConsumers) terminate(uid types.UID) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if sp, ok := pc.pods[uid]; ok {
		closeOnce(sp.stop)
	}
}

// halt ends every pod's process and waits for them.
func (pc *podConsumers) halt() {
	pc.mu.Lock()
	pc.stopped = true
	for _, sp := range pc.pods {
		closeOnce(sp.stop)
	}
	pc.mu.Unlock()
	pc.wg.Wait()
}

// consumersByTest: the Deployments each top-level test declared; every
// matrix scenario of that test is judged by all of them.
var consumersByTest = struct {
	sync.Mutex
	m map[string][]*podConsumers
}{m: map[string][]*podConsumers{}}

func registerConsumers(t testing.TB, pc *podConsumers) {
	top := topTest(t)
	consumersByTest.Lock()
	consumersByTest.m[top] = append(consumersByTest.m[top], pc)
	consumersByTest.Unlock()
	t.Cleanup(func() {
		consumersByTest.Lock()
		delete(consumersByTest.m, top)
		consumersByTest.Unlock()
	})
}

func consumersOf(t testing.TB) []*podConsumers {
	consumersByTest.Lock()
	defer consumersByTest.Unlock()
	return append([]*podConsumers(nil), consumersByTest.m[topTest(t)]...)
}

func topTest(t testing.TB) string { return strings.SplitN(t.Name(), "/", 2)[0] }
