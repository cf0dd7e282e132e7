package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/backend/mysql"
	"rekey.io/rekey/internal/testenv"
)

const (
	loginRate      = 100              // logins per second, over all instances and users
	baselineWindow = 10 * time.Second // idle load before the rotations
	rotationWindow = 10 * time.Second // rotate + discard cycles back to back, at least
)

// BenchmarkLoginsUnderLoad is zero downtime measured: clients log in at a
// fixed rate (open loop, a fresh connection each, round robin over the
// instances and users, through the same 2 ms proxies as the operator) with
// whatever the distributed Secret holds at that moment, first on an idle
// cluster, then while the parallel manager rotates and discards back to
// back. A refused login fails the benchmark (a correctness check); the p99
// login latency during rotation is reported against the idle baseline.
func BenchmarkLoginsUnderLoad(b *testing.B) {
	cp, k8s := apiServer(b)
	c := testenv.MySQLClusterForTest(b, testenv.MySQLOptions{Replicas: 2})
	lp := newLatencyProxies()
	b.Cleanup(lp.stop)
	var hosts []string
	for _, addr := range c.Addrs() {
		p, err := lp.add(addr, rtt)
		if err != nil {
			b.Fatal(err)
		}
		hosts = append(hosts, p)
	}
	ns, lbl := "load", map[string]string{"bench": "load"}
	createNamespace(b, k8s, ns)
	adminSecret(b, k8s, ns)
	var users []string
	for i := range 8 {
		users = append(users, fmt.Sprintf("app-%d", i))
	}
	tr := newTracker(b, cp.Config, lbl)
	m := startManager(b, cp.Config, managerOptions{selector: lbl, concurrency: 8})
	if err := k8s.Create(context.Background(), mysqlSet(ns, "app", lbl, hosts, users)); err != nil {
		b.Fatal(err)
	}
	tr.wait(b, tr.await(ns, "app", provisioned), 2*time.Minute, ns, "app", "provisioning")
	cons := newConsumers(b, cp.Config, ns, "app-creds", hosts, users)
	b.Run(fmt.Sprintf("instances=%d/users=%d/rate=%d", len(hosts), len(users), loginRate), func(b *testing.B) {
		benchUnderLoad(b, k8s, tr, m, cons, ns, "app")
	})
}

func benchUnderLoad(b *testing.B, k8s client.Client, tr *tracker, m *manager, cons *consumers, ns, name string) {
	ctx := context.Background()
	cons.reset()
	stop := cons.run(loginRate)
	cycles := 0
	start := time.Now()
	var idleCPU, rotCPU cpuUse
	for range b.N {
		cons.window.Store(windowIdle)
		c0 := sampleCPU()
		time.Sleep(baselineWindow)
		idleCPU = c0.until(sampleCPU())
		cons.window.Store(windowNone)
		c1 := sampleCPU()
		var rotating time.Duration
		for k := 0; rotating < rotationWindow || k < 3; k++ {
			quiesce(b, m, 300*time.Millisecond)
			cycles++
			id := fmt.Sprintf("load-%d-%d", time.Now().UnixNano(), cycles)
			old := cons.current()
			toDistributed := tr.await(ns, name, distributed(id))
			t0 := time.Now()
			cons.window.Store(windowRotating)
			if err := rotateReq(ctx, k8s, ns, name, id); err != nil {
				b.Fatal(err)
			}
			tr.wait(b, toDistributed, 2*time.Minute, ns, name, "Distributed")
			// As an operator confirms a discard: only once every client
			// has moved to the new passwords and let go of the old ones.
			cons.waitMoved(b, old)
			toIdle := tr.await(ns, name, idleAfter(id))
			cons.window.Store(windowDiscarding)
			if err := discardReq(ctx, k8s, ns, name, id); err != nil {
				b.Fatal(err)
			}
			tr.wait(b, toIdle, 2*time.Minute, ns, name, "Idle")
			rotating += time.Since(t0)
			cons.window.Store(windowNone)
		}
		rotCPU = c1.until(sampleCPU())
	}
	stop()
	elapsed := time.Since(start)
	idle, rot := cons.latencies(windowIdle), cons.latencies(windowRotating, windowDiscarding)
	rotOnly, discOnly := cons.latencies(windowRotating), cons.latencies(windowDiscarding)
	if len(idle) == 0 || len(rot) == 0 {
		b.Fatalf("no logins measured (idle %d, rotating %d)", len(idle), len(rot))
	}
	b.Logf("login latency idle p90 %v p95 %v max %v; rotating p90 %v p95 %v max %v",
		pct(idle, 90), pct(idle, 95), pct(idle, 100), pct(rot, 90), pct(rot, 95), pct(rot, 100))
	if len(rotOnly) > 0 && len(discOnly) > 0 {
		b.Logf("by phase: trigger → discard request %d logins, p50 %v p99 %v; discard → Idle %d logins, p50 %v p99 %v",
			len(rotOnly), pct(rotOnly, 50), pct(rotOnly, 99), len(discOnly), pct(discOnly, 50), pct(discOnly, 99))
	}
	b.ReportMetric(float64(cons.attempts.Load()), "logins")
	b.ReportMetric(float64(cons.attempts.Load())/elapsed.Seconds(), "logins/s")
	b.ReportMetric(float64(cons.failures.Load()), "failed-logins")
	b.ReportMetric(float64(cycles)/float64(b.N), "rotations")
	b.ReportMetric(float64(len(rot)), "logins-during-rotation")
	b.ReportMetric(ms(pct(idle, 50)), "idle-p50-ms")
	b.ReportMetric(ms(pct(idle, 99)), "idle-p99-ms")
	b.ReportMetric(ms(pct(rot, 50)), "rotating-p50-ms")
	b.ReportMetric(ms(pct(rot, 99)), "rotating-p99-ms")
	b.ReportMetric(float64(pct(rot, 99))/float64(pct(idle, 99)), "p99-ratio")
	b.ReportMetric(idleCPU.busy, "idle-cpu-busy-%")
	b.ReportMetric(rotCPU.busy, "rotating-cpu-busy-%")
	if f := cons.failures.Load(); f > 0 {
		b.Fatalf("%d of %d logins were refused (zero downtime broken):\n%s", f, cons.attempts.Load(), strings.Join(cons.firstFailures, "\n"))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct is the p-th percentile (nearest rank) of sorted latencies.
func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

const (
	windowNone = iota
	windowIdle
	windowRotating   // trigger → discard request
	windowDiscarding // discard request → Idle
)

// credentials are the distributed Secret's contents as the clients saw
// them; inflight counts the logins still using them.
type credentials struct {
	pw       map[string]string
	inflight atomic.Int64
}

// consumers are the clients: they read the distributed Secret through a
// watch (as a sidecar reloading a mounted Secret would, minus the kubelet's
// delay) and log in with what it holds.
type consumers struct {
	hosts, users []string
	mu           sync.RWMutex
	cur          *credentials
	next         atomic.Int64
	window       atomic.Int32

	attempts, failures atomic.Int64
	lmu                sync.Mutex
	lat                [4][]time.Duration
	firstFailures      []string
}

func newConsumers(b *testing.B, cfg *rest.Config, ns, secret string, hosts, users []string) *consumers {
	b.Helper()
	c := &consumers{hosts: hosts, users: users}
	ch, err := cache.New(rest.CopyConfig(cfg), cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Namespaces: map[string]cache.Config{ns: {}}, Field: fields.OneTermEqualSelector("metadata.name", secret)}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.Cleanup(func() { cancel(); <-done })
	inf, err := ch.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		b.Fatal(err)
	}
	on := func(o any) {
		if s, ok := o.(*corev1.Secret); ok {
			pw := map[string]string{}
			for k, v := range s.Data {
				pw[k] = string(v)
			}
			c.mu.Lock()
			// A new snapshot only when the passwords change: waitMoved
			// drains the logins of the old one.
			if c.cur == nil || !maps.Equal(c.cur.pw, pw) {
				c.cur = &credentials{pw: pw}
			}
			c.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, o any) { on(o) }}); err != nil {
		b.Fatal(err)
	}
	go func() { defer close(done); _ = ch.Start(ctx) }()
	if !ch.WaitForCacheSync(ctx) || c.current() == nil {
		b.Fatalf("distributed Secret %s/%s not seen", ns, secret)
	}
	return c
}

func (c *consumers) current() *credentials {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cur
}

func (c *consumers) reset() {
	c.attempts.Store(0)
	c.failures.Store(0)
	c.lat, c.firstFailures = [4][]time.Duration{}, nil
}

// run starts logins at rate per second, each in its own goroutine so a
// slow login never slows the rate; logins due while this process was not
// scheduled start late rather than never. The returned func stops them
// and waits.
func (c *consumers) run(rate int) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		start, started := time.Now(), 0
		for {
			select {
			case <-quit:
				wg.Wait()
				return
			case <-t.C:
				for due := int(time.Since(start).Seconds() * float64(rate)); started < due; started++ {
					k := int(c.next.Add(1))
					wg.Add(1)
					go func() { defer wg.Done(); c.login(k) }()
				}
			}
		}
	}()
	return func() { close(quit); <-done }
}

func (c *consumers) login(k int) {
	c.mu.RLock()
	cred := c.cur
	cred.inflight.Add(1)
	c.mu.RUnlock()
	defer cred.inflight.Add(-1)
	win := c.window.Load()
	host, user := c.hosts[k%len(c.hosts)], c.users[(k/len(c.hosts))%len(c.users)]
	cfg := gomysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = user, cred.pw[mysql.DefaultKey(user)], "tcp", host
	cfg.TLSConfig = "skip-verify" // caching_sha2_password's full authentication needs TLS or RSA
	cfg.Timeout = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.attempts.Add(1)
	t0 := time.Now()
	var err error
	if conn, cerr := gomysql.NewConnector(cfg); cerr != nil {
		err = cerr
	} else if dc, cerr := conn.Connect(ctx); cerr != nil {
		err = cerr
	} else {
		dc.Close()
	}
	d := time.Since(t0)
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if err != nil {
		c.failures.Add(1)
		if len(c.firstFailures) < 10 {
			c.firstFailures = append(c.firstFailures, fmt.Sprintf("%s %s on %s: %v", t0.Format("15:04:05.000"), user, host, err))
		}
		return
	}
	c.lat[win] = append(c.lat[win], d)
}

// waitMoved waits until the clients have the Secret that replaced old and
// no login still uses old.
func (c *consumers) waitMoved(b *testing.B, old *credentials) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for c.current() == old || old.inflight.Load() > 0 {
		if time.Now().After(deadline) {
			b.Fatal("the clients never moved to the distributed passwords")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// latencies of the successful logins that started in the windows, sorted.
func (c *consumers) latencies(ws ...int32) []time.Duration {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	var out []time.Duration
	for _, w := range ws {
		out = append(out, c.lat[w]...)
	}
	slices.Sort(out)
	return out
}
