package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/naming"
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
// Every login MySQL refuses (access denied) is a lockout: it is kept with
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
	t       testing.TB
	c       client.Client
	ns      string
	name    string            // the Deployment
	users   map[string]string // Secret key → MySQL user
	keys    []string          // the Secret's keys, in the order pods take turns
	targets func() []*testenv.MySQLInstance

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
// creates it, with the pods played as described above. Call it before the
// set is created: the pods then wait for the Secret, as a kubelet retries a
// container whose envFrom Secret does not exist yet. targets are the
// instances a pod logs in to (a cluster manager routes consumers only to
// instances that serve). The consumers run until the test ends; every
// matrix scenario of the test counts their logins.
func deployConsumers(t *testing.T, cs *v1.CredentialSet, keys map[string]string, targets func() []*testenv.MySQLInstance) *podConsumers {
	t.Helper()
	if cs.ResourceVersion != "" {
		t.Fatal("deployConsumers: declare the consumers before creating the set")
	}
	if rolloutCP == nil || cp != rolloutCP {
		t.Fatal("deployConsumers: the test runs on a control plane without a Deployment controller (use matrixCluster)")
	}
	if len(cs.Spec.Distribution) == 0 {
		t.Fatal("deployConsumers: the set distributes no Secret")
	}
	name := cs.Name + "-app"
	cs.Spec.Consumers = append(cs.Spec.Consumers, v1.ConsumerRef{Kind: v1.KindDeployment, Name: name})
	secret := cs.Spec.Distribution[0].Name
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
	pc := startPodConsumers(t, k8s, cp, cs.Namespace, name, keys, targets)
	registerConsumers(t, pc)
	return pc
}

// startPodConsumers plays the pods of Deployment ns/name until the test ends.
func startPodConsumers(t testing.TB, c client.Client, plane *testenv.ControlPlane, ns, name string,
	keys map[string]string, targets func() []*testenv.MySQLInstance) *podConsumers {
	pc := &podConsumers{t: t, c: c, ns: ns, name: name, users: keys, targets: targets, pods: map[types.UID]*simPod{}}
	for k := range keys {
		pc.keys = append(pc.keys, k)
	}
	sort.Strings(pc.keys)

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

// run is one pod's process: read the Secret once, then log in on every tick.
func (pc *podConsumers) run(sp *simPod, secret string) {
	defer pc.wg.Done()
	var s corev1.Secret
	for {
		// The container cannot start before its envFrom Secret exists
		// (CreateContainerConfigError); the kubelet retries.
		err := pc.c.Get(context.Background(), client.ObjectKey{Namespace: pc.ns, Name: secret}, &s)
		if err == nil {
			break
		}
		select {
		case <-sp.stop:
			return
		case <-time.After(consumerLoginEvery):
		}
	}
	creds := map[string]string{}
	for _, k := range pc.keys {
		creds[k] = string(s.Data[k])
	}
	sp.generation, sp.hash = s.Annotations[naming.GenerationAnnotation], s.Annotations[naming.SecretHashAnnotation]
	pc.starts.Add(1)
	pc.t.Logf("consumer pod %s started: read Secret %s at generation %s (secret-hash %s)", sp.name, secret, sp.generation, sp.hash)

	tick := time.NewTicker(consumerLoginEvery)
	defer tick.Stop()
	for turn := 0; ; turn++ {
		select {
		case <-sp.stop:
			return
		case <-tick.C:
		}
		for n, inst := range pc.targets() {
			// Checked before every login: when a round is slower than a
			// tick, select above would pick the pending tick over the stop
			// half of the time, and a pod told to stop would go on.
			if stopped(sp) {
				return
			}
			k := pc.keys[(turn+n)%len(pc.keys)]
			began := time.Now()
			err := inst.CanLogin(pc.users[k], creds[k])
			if refusedLogin(err) && pc.terminatedBy(sp, began) {
				return
			}
			pc.record(sp, pc.users[k], inst, err)
		}
	}
}

func stopped(sp *simPod) bool {
	select {
	case <-sp.stop:
		return true
	default:
		return false
	}
}

// terminatedBy says whether the pod had been told to stop (its deletion
// requested: SIGTERM) before a login that began at began. The informer can
// tell the pod late on a loaded machine; before a refusal is counted, the
// API server is asked. A pod already gone entirely was deleted: kwok
// removes a pod only after its deletion was requested, which takes far
// longer than the moment between the refused login and this check. Such a
// refusal is logged and counted apart (refusedTerminating), not as a
// lockout, and the pod's process ends.
func (pc *podConsumers) terminatedBy(sp *simPod, began time.Time) bool {
	p := &corev1.Pod{}
	err := pc.c.Get(context.Background(), client.ObjectKey{Namespace: pc.ns, Name: sp.name}, p)
	var sigterm time.Time
	switch {
	case apierrors.IsNotFound(err):
		sigterm = time.Time{} // deleted: requested before now
	case err != nil || p.DeletionTimestamp == nil:
		return false
	default:
		sigterm = p.DeletionTimestamp.Add(-time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 0)) * time.Second)
		if sigterm.After(began) {
			return false // deleted after the refused login began: it was running
		}
	}
	pc.refusedTerminating.Add(1)
	pc.t.Logf("consumer pod %s: a login refused after the pod's deletion was requested (%s): not a lockout, the process ends",
		sp.name, deletionTime(sigterm))
	closeOnce(sp.stop)
	return true
}

func deletionTime(t time.Time) string {
	if t.IsZero() {
		return "the pod is already gone"
	}
	return "at " + t.Format("15:04:05")
}

func (pc *podConsumers) record(sp *simPod, user string, inst *testenv.MySQLInstance, err error) {
	switch {
	case err == nil:
		pc.attempts.Add(1)
	case refusedLogin(err):
		pc.attempts.Add(1)
		pc.refused.Add(1)
		pc.mu.Lock()
		if len(pc.refusals) < consumerKeptRefusals {
			pc.refusals = append(pc.refusals, consumerRefusal{At: time.Now(), Deployment: pc.name, Pod: sp.name, User: user,
				Instance: inst.Name, Generation: sp.generation, SecretHash: sp.hash, Error: err.Error()})
		}
		pc.mu.Unlock()
	default:
		pc.unanswered.Add(1) // stopped, starting, being rebuilt: not a login
	}
}

// refusedLogin: MySQL answered and would not let the account in — a wrong
// password (1045), a locked account (3118), an expired password (1862).
// MySQL's message names the account and host, never the password.
func refusedLogin(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1045, 3118, 1862:
		return true
	}
	return false
}

func refusalLines(rs []consumerRefusal) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString("  " + r.String() + "\n")
	}
	return b.String()
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

// rolloutCP is the control plane of the matrix test running now (nil
// between them); cp and k8s point at it while that test runs.
var rolloutCP *testenv.ControlPlane

// matrixCluster starts the MySQL cluster of a matrix test and, at the same
// time (they take seconds each; in parallel the test waits for the slower
// only), a full control plane of its own (API server, etcd, controller-
// manager, scheduler, kwok) on which the Deployment consumers really roll
// out. The suite's shared API server has no controllers. Until the test
// ends, cp and k8s are that control plane (as TestRolloutGate does), and
// its Secrets are sampled and scanned for leaks like the suite's.
func matrixCluster(t *testing.T, opts testenv.MySQLOptions) *testenv.MySQLCluster {
	t.Helper()
	type started struct {
		cp  *testenv.ControlPlane
		err error
	}
	ch := make(chan started, 1)
	begin := time.Now()
	var cpTook time.Duration
	go func() {
		c, err := env.StartAPIServer(testenv.ControlPlaneOptions{CRDDirectoryPaths: []string{"config/crd/bases"}, Full: true})
		cpTook = time.Since(begin)
		ch <- started{c, err}
	}()
	wait := func() started {
		s := <-ch
		ch <- s
		return s
	}
	// Registered first, so it runs last: the manager, the consumers and the
	// MySQL cluster are gone by then.
	t.Cleanup(func() {
		s := wait()
		if s.cp == nil {
			return
		}
		if t.Failed() {
			s.cp.KeepDir = true
			t.Logf("control plane logs kept: %s", strings.Join(s.cp.LogPaths(), " "))
		}
		if err := s.cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	c := testenv.MySQLClusterForTest(t, opts)
	mysqlTook := time.Since(begin)
	nameInstances(append(c.Instances(), c.Downstream)...)
	s := wait()
	if s.err != nil {
		t.Fatalf("full control plane: %v", s.err)
	}
	plane := s.cp
	kc, err := client.New(plane.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := kc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OperatorNamespace}}); err != nil {
		t.Fatal(err)
	}
	sharedCP, sharedK8s := cp, k8s
	cp, k8s, rolloutCP = plane, kc, plane
	sampler := startSecretSampler(kc, plane.Config.Host)
	t.Cleanup(func() {
		if err := sampler.scan(kc); err != nil {
			t.Error(err)
		}
		cp, k8s, rolloutCP = sharedCP, sharedK8s, nil
	})
	// The figures say what the control plane costs the test: only what it
	// took beyond the MySQL cluster adds to its time.
	t.Logf("full control plane for the consumers: kube-apiserver %s, fake node %s; started in %s, the MySQL cluster in %s",
		plane.Version, plane.NodeName, cpTook.Round(100*time.Millisecond), mysqlTook.Round(100*time.Millisecond))
	return c
}

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
