package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// operatorNamespace holds the source Secrets.
const operatorNamespace = "rekey-system"

var (
	scheme  = runtime.NewScheme()
	logOnce sync.Once
)

func init() {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
}

// apiServer starts kube-apiserver and etcd for one benchmark with the
// product's CRDs and the operator's namespace, and returns an admin client.
func apiServer(b *testing.B) (*testenv.ControlPlane, client.Client) {
	b.Helper()
	logOnce.Do(func() {
		// The managers' logs cost time the benchmarks measure: discarded
		// unless REKEY_BENCH_LOGS=1 (then on stderr, development format).
		log := logr.Discard()
		if os.Getenv("REKEY_BENCH_LOGS") != "" {
			log = zap.New(zap.WriteTo(io.Writer(os.Stderr)), zap.UseDevMode(true))
		}
		ctrl.SetLogger(log)
	})
	cp := testenv.APIServerForTest(b, testenv.ControlPlaneOptions{CRDDirectoryPaths: []string{"config/crd/bases"}})
	k8s, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	createNamespace(b, k8s, operatorNamespace)
	return cp, k8s
}

func createNamespace(b *testing.B, k8s client.Client, name string) {
	b.Helper()
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		b.Fatal(err)
	}
}

// adminSecret holds the harness superuser's password, which the sets name
// as their (not rotated) admin's, and the CA of the servers' certificates,
// which they verify TLS with.
func adminSecret(b *testing.B, k8s client.Client, ns string) {
	b.Helper()
	ca, err := testenv.MySQLCAPEM()
	if err != nil {
		b.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mysql-admin"},
		StringData: map[string]string{"password": testenv.EnvPassword, "ca.crt": string(ca)}}
	if err := k8s.Create(context.Background(), s); err != nil {
		b.Fatal(err)
	}
}

// mysqlSet rotates the named users on hosts, as the harness superuser, and
// distributes them to <name>-creds in its namespace.
func mysqlSet(ns, name string, lbl map[string]string, hosts, users []string) *v1.CredentialSet {
	var us []v1.MySQLUser
	for _, u := range users {
		us = append(us, v1.MySQLUser{Name: u})
	}
	return &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{Hosts: hosts},
				Admin: v1.MySQLAdmin{User: testenv.EnvUser,
					PasswordSecretRef: &v1.SecretKeyRef{Name: "mysql-admin", Key: "password"}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "mysql-admin", Key: "ca.crt"},
				Users:          us,
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-creds"}},
		},
	}
}

// requestCounter counts the HTTP requests one manager sends to the API
// server (its client, cache and event recorder share the transport), in
// total and by verb and resource.
type requestCounter struct {
	total, writes, watches atomic.Int64
	mu                     sync.Mutex
	byKind                 map[string]int
}

// requestKind is "VERB resource[/subresource]", e.g. "PATCH credentialsets/status".
func requestKind(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) > 0 && parts[0] == "apis" && len(parts) > 3 {
		parts = parts[3:]
	} else if len(parts) > 2 {
		parts = parts[2:] // api/v1
	}
	if len(parts) > 1 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	kind := strings.Join(parts, "/")
	if len(parts) >= 2 {
		kind = strings.Join(append(parts[:1:1], parts[2:]...), "/") // drop the object's name
	}
	verb := r.Method
	if r.URL.Query().Get("watch") == "true" {
		verb = "WATCH"
	} else if verb == http.MethodGet && len(parts) == 1 {
		verb = "LIST"
	}
	return verb + " " + kind
}

// kinds is a copy of the counts by kind.
func (c *requestCounter) kinds() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byKind)
}

// kindsSince formats what was counted after an earlier copy, most first.
func (c *requestCounter) kindsSince(before map[string]int) string {
	type kv struct {
		k string
		n int
	}
	var out []kv
	for k, n := range c.kinds() {
		if d := n - before[k]; d > 0 {
			out = append(out, kv{k, d})
		}
	}
	slices.SortFunc(out, func(a, b kv) int { return cmp.Or(b.n-a.n, strings.Compare(a.k, b.k)) })
	var parts []string
	for _, e := range out {
		parts = append(parts, fmt.Sprintf("%d %s", e.n, e.k))
	}
	return strings.Join(parts, ", ")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		c.total.Add(1)
		c.mu.Lock()
		if c.byKind == nil {
			c.byKind = map[string]int{}
		}
		c.byKind[requestKind(r)]++
		c.mu.Unlock()
		if os.Getenv("REKEY_BENCH_TRACE") != "" {
			fmt.Fprintln(os.Stderr, "REQ", time.Now().Format("15:04:05.000"), r.Method, r.URL.Path, r.URL.RawQuery)
		}
		switch {
		case r.URL.Query().Get("watch") == "true":
			c.watches.Add(1)
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			c.writes.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

// managerOptions shape one in-process manager.
type managerOptions struct {
	selector    map[string]string // only CredentialSets with these labels
	concurrency int               // InstanceConcurrency
	workers     int               // MaxConcurrentReconciles (0: 1, as shipped before issue 18)
	resync      time.Duration
}

// manager is the real controller in this process, configured as
// cmd/manager configures it (no client-side rate limit, Secrets read live).
type manager struct {
	requests *requestCounter
	cancel   context.CancelFunc
	done     chan error
	// depth0 is the queue-depth gauge before this manager started. The
	// gauge is shared by every manager of the process (one controller
	// name), and a manager stopped with sets still queued leaves them
	// counted in it for good: depth is measured from here.
	depth0 float64
}

func startManager(b *testing.B, base *rest.Config, o managerOptions) *manager {
	b.Helper()
	m := &manager{requests: &requestCounter{}, done: make(chan error, 1)}
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = -1, 0 // as ctrl.GetConfig: API Priority and Fairness, no client-side limit
	cfg.WrapTransport = m.requests.wrap
	opts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: o.workers},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Cache:                  cache.Options{ByObject: controller.CacheByObject()},
	}
	if o.selector != nil {
		opts.Cache.ByObject[&v1.CredentialSet{}] = cache.ByObject{Label: labels.SelectorFromSet(o.selector)}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	r := &controller.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("rekey"), Namespace: operatorNamespace,
		DefaultGracePeriod: 5 * time.Minute, InstanceConcurrency: o.concurrency, ResyncPeriod: o.resync,
		MaxConcurrentReconciles: max(o.workers, 1),
	}
	if err := r.SetupWithManager(mgr); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.depth0 = queueDepth()
	go func() { m.done <- mgr.Start(ctx) }()
	b.Cleanup(m.stop)
	return m
}

func (m *manager) stop() {
	if m.cancel != nil {
		m.cancel()
		<-m.done
		m.cancel = nil
	}
}

// metricSum sums a controller-runtime metric (counter or gauge) over the
// series whose label has the value.
func metricSum(name, label, value string) float64 {
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}

// reconciles is how many times the credentialset controllers of this
// process have reconciled (all managers: measure one at a time).
func reconciles() float64 {
	return metricSum("controller_runtime_reconcile_total", "controller", "credentialset")
}

func queueDepth() float64 { return metricSum("workqueue_depth", "name", "credentialset") }

// busy: sets wait in m's queue, or a reconcile is running (one that waits
// on a backend sends no request and finishes nothing for seconds).
func (m *manager) busy() bool {
	return queueDepth() > m.depth0 || metricSum("controller_runtime_active_workers", "controller", "credentialset") > 0
}

// quiesce waits until the manager has sent no request and finished no
// reconcile for quiet: the trailing reconciles of the last status write are
// part of the cycle that caused them.
func quiesce(b *testing.B, m *manager, quiet time.Duration) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	last, lastR, since := m.requests.total.Load(), reconciles(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			b.Fatal("the manager never went quiet")
		}
		time.Sleep(50 * time.Millisecond)
		if n, r := m.requests.total.Load(), reconciles(); n != last || r != lastR || m.busy() {
			last, lastR, since = n, r, time.Now()
		}
	}
}

// annotate sets one annotation with a merge patch, as kubectl annotate does.
func annotate(ctx context.Context, k8s client.Client, ns, name, key, value string) error {
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	return k8s.Patch(ctx, cs, client.RawPatch(types.MergePatchType, []byte(patch)))
}

func rotateReq(ctx context.Context, k8s client.Client, ns, name, id string) error {
	return annotate(ctx, k8s, ns, name, engine.RotateAnnotation, id)
}

func discardReq(ctx context.Context, k8s client.Client, ns, name, id string) error {
	return annotate(ctx, k8s, ns, name, engine.DiscardAnnotation, id)
}

func distributed(id string) func(*v1.CredentialSet) bool {
	return func(cs *v1.CredentialSet) bool {
		return cs.Status.Phase == v1.PhaseDistributed && cs.Status.RotationID == id && cs.Status.RotateApplied
	}
}

func idleAfter(id string) func(*v1.CredentialSet) bool {
	return func(cs *v1.CredentialSet) bool {
		return cs.Status.Phase == v1.PhaseIdle && cs.Status.LastRotationID == id
	}
}

func provisioned(cs *v1.CredentialSet) bool {
	return cs.Status.Phase == v1.PhaseIdle && cs.Status.KeyGeneration >= 1
}

func stateOf(cs *v1.CredentialSet) string {
	if cs == nil {
		return "not seen"
	}
	var conds []string
	for _, c := range cs.Status.Conditions {
		conds = append(conds, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	return fmt.Sprintf("phase=%s rotation=%q gen=%d last=%q %v", cs.Status.Phase, cs.Status.RotationID,
		cs.Status.KeyGeneration, cs.Status.LastRotationID, conds)
}
