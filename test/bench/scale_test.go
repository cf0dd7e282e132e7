package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

const scaleNamespaces = 10

// scaleSize is how many CredentialSets BenchmarkScale creates
// (REKEY_BENCH_SETS, default 1000) and how many of them rotate at once in
// the throughput batch (REKEY_BENCH_BATCH, default a tenth of the sets).
func scaleSize(b *testing.B) (sets, batch int) {
	sets, batch = 1000, 0
	for _, e := range []struct {
		name string
		v    *int
	}{{"REKEY_BENCH_SETS", &sets}, {"REKEY_BENCH_BATCH", &batch}} {
		if s := os.Getenv(e.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				b.Fatalf("%s=%q: want a positive number", e.name, s)
			}
			*e.v = n
		}
	}
	if batch == 0 {
		batch = max(sets/10, 1)
	}
	return sets, min(batch, sets)
}

type setRef struct{ ns, name string }

// BenchmarkScale puts many CredentialSets (one MySQL user each, all on one
// mysqld on loopback: the backend is shared, the API objects are not) on
// one manager against the real API server, and measures the manager's heap
// once they are provisioned and settled, how long one rotate request takes
// to reach Distributed on that fleet, and rotations per minute when a batch
// of sets rotates (rotate + discard) at once — first with 4 reconcile
// workers, then, after a restart and its start-up sweep over every set,
// with one (as cmd/manager shipped before issue 18). CPU per process over
// the batch shows what saturates first. All sets share one mysqld, so the
// keyed lock runs their reconciles one at a time with either count.
func BenchmarkScale(b *testing.B) {
	n, batch := scaleSize(b)
	cp, k8s := apiServer(b)
	c := testenv.MySQLClusterForTest(b, testenv.MySQLOptions{NoReplicas: true})
	lbl := map[string]string{"bench": "scale"}
	tr := newTracker(b, cp.Config, lbl)
	for i := range scaleNamespaces {
		ns := fmt.Sprintf("scale-%d", i)
		createNamespace(b, k8s, ns)
		adminSecret(b, k8s, ns)
	}
	sets := make([]setRef, n)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range sets {
		sets[i] = setRef{fmt.Sprintf("scale-%d", i%scaleNamespaces), fmt.Sprintf("set-%04d", i)}
		g.Go(func() error {
			cs := mysqlSet(sets[i].ns, sets[i].name, lbl, []string{c.Primary.Addr()}, []string{fmt.Sprintf("scale-%04d", i)})
			return k8s.Create(context.Background(), cs)
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	heap0 := heapInUse()
	// Provisioned by a manager with 4 reconcile workers (a fifth of the
	// time one takes); measured with it, then with the shipped one.
	m := startManager(b, cp.Config, managerOptions{selector: lbl, concurrency: 8, workers: 4})
	t0 := time.Now()
	waitAll(b, tr, sets, provisioned, "provisioning")
	provision := time.Since(t0)
	quiesce(b, m, 2*time.Second)
	heap := heapInUse() - heap0
	seq := 0
	b.Run(fmt.Sprintf("sets=%d/workers=4", n), func(b *testing.B) {
		benchScale(b, k8s, tr, m, sets, batch, &seq) // resets user metrics: report after
		b.ReportMetric(float64(n)/provision.Minutes(), "provisioned/min")
		b.ReportMetric(heap/(1<<20), "manager-heap-MiB")
		b.ReportMetric(heap/float64(n)/(1<<10), "heap-KiB/set")
	})
	m.stop()
	// A restarted manager looks at every set once before anything else.
	r0, t1 := reconciles(), time.Now()
	m = startManager(b, cp.Config, managerOptions{selector: lbl, concurrency: 8})
	for reconciles()-r0 < float64(n) || m.busy() {
		if time.Since(t1) > 10*time.Minute {
			b.Fatalf("start-up sweep: %v of %d sets reconciled after 10m", reconciles()-r0, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sweep := time.Since(t1)
	quiesce(b, m, 2*time.Second)
	b.Run(fmt.Sprintf("sets=%d/workers=1", n), func(b *testing.B) {
		benchScale(b, k8s, tr, m, sets, batch, &seq)
		b.ReportMetric(sweep.Seconds(), "startup-sweep-s")
	})
}

func heapInUse() float64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse)
}

// waitAll waits until every set satisfies cond and returns when each did.
func waitAll(b *testing.B, tr *tracker, sets []setRef, cond func(*v1.CredentialSet) bool, what string) []time.Time {
	b.Helper()
	chs := make([]<-chan time.Time, len(sets))
	for i, s := range sets {
		chs[i] = tr.await(s.ns, s.name, cond)
	}
	out := make([]time.Time, len(sets))
	for i, s := range sets {
		out[i] = tr.wait(b, chs[i], 10*time.Minute, s.ns, s.name, what)
	}
	return out
}

// eachSet patches every set with up to 8 requests in flight, as many
// kubectl annotate commands at once would.
func eachSet(b *testing.B, sets []setRef, fn func(s setRef) error) {
	b.Helper()
	var g errgroup.Group
	g.SetLimit(8)
	for _, s := range sets {
		g.Go(func() error { return fn(s) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

func benchScale(b *testing.B, k8s client.Client, tr *tracker, m *manager, sets []setRef, batch int, seq *int) {
	ctx := context.Background()
	var change []time.Duration
	var rotations, requests, recs float64
	var inBatch []time.Duration
	var busy time.Duration
	var cpu cpuUse
	var mu sync.Mutex
	b.ResetTimer()
	for range b.N {
		// One change on a settled fleet, five times, on sets far apart.
		for k := range 5 {
			s := sets[(k*len(sets)/5+*seq)%len(sets)]
			*seq++
			id := fmt.Sprintf("scale-%d", *seq)
			ch := tr.await(s.ns, s.name, distributed(id))
			t0 := time.Now()
			if err := rotateReq(ctx, k8s, s.ns, s.name, id); err != nil {
				b.Fatal(err)
			}
			change = append(change, tr.wait(b, ch, 5*time.Minute, s.ns, s.name, "Distributed").Sub(t0))
			idle := tr.await(s.ns, s.name, idleAfter(id))
			if err := discardReq(ctx, k8s, s.ns, s.name, id); err != nil {
				b.Fatal(err)
			}
			tr.wait(b, idle, 5*time.Minute, s.ns, s.name, "Idle")
		}
		quiesce(b, m, time.Second)

		// A batch rotating at once: every set's rotate request, then, as
		// each reaches Distributed, its discard request.
		*seq++
		group := slices.Clone(sets[:batch])
		id := fmt.Sprintf("batch-%d", *seq)
		req0, rec0, cpu0 := m.requests.total.Load(), reconciles(), sampleCPU()
		dist := make([]<-chan time.Time, len(group))
		idle := make([]<-chan time.Time, len(group))
		for i, s := range group {
			dist[i] = tr.await(s.ns, s.name, distributed(id))
			idle[i] = tr.await(s.ns, s.name, idleAfter(id))
		}
		t0 := time.Now()
		errs := make(chan error, len(group))
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i, s := range group {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case at := <-dist[i]:
					mu.Lock()
					inBatch = append(inBatch, at.Sub(t0))
					mu.Unlock()
				case <-time.After(10 * time.Minute):
					errs <- fmt.Errorf("%s/%s: not Distributed after 10m (%s)", s.ns, s.name, stateOf(tr.get(s.ns, s.name)))
					return
				}
				sem <- struct{}{}
				defer func() { <-sem }()
				if err := discardReq(ctx, k8s, s.ns, s.name, id); err != nil {
					errs <- err
				}
			}()
		}
		eachSet(b, group, func(s setRef) error { return rotateReq(ctx, k8s, s.ns, s.name, id) })
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		for i, s := range group {
			tr.wait(b, idle[i], 10*time.Minute, s.ns, s.name, "Idle")
		}
		busy += time.Since(t0)
		cpu = cpu0.until(sampleCPU())
		quiesce(b, m, time.Second)
		rotations += float64(len(group))
		requests += float64(m.requests.total.Load() - req0)
		recs += reconciles() - rec0
	}
	b.StopTimer()
	slices.Sort(change)
	slices.Sort(inBatch)
	b.ReportMetric(ms(change[len(change)/2]), "change-to-distributed-ms")
	b.ReportMetric(ms(change[len(change)-1]), "change-max-ms")
	b.ReportMetric(rotations/busy.Minutes(), "rotations/min")
	b.ReportMetric(ms(pct(inBatch, 50)), "batch-p50-to-distributed-ms")
	b.ReportMetric(ms(pct(inBatch, 99)), "batch-p99-to-distributed-ms")
	b.ReportMetric(requests/rotations, "api-req/rotation")
	b.ReportMetric(recs/rotations, "reconciles/rotation")
	b.ReportMetric(cpu.busy, "machine-busy-%")
	for _, p := range []string{"kube-apiserver", "etcd", "mysqld", "self"} {
		b.ReportMetric(cpu.procs[p], p+"-cpu-%")
	}
}
