package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/testenv"
)

// blackHoleListener accepts TCP connections and never writes: a MySQL
// client waits for a greeting that never comes.
func blackHoleListener(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				buf := make([]byte, 512)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	b.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// BenchmarkBlackHole (issue 18 item 1): rotations per minute of healthy
// sets while a tenth of all sets point at a MySQL host that accepts
// connections and never answers, against the same with no such set — for
// one reconcile worker (the design before issue 18) and for
// DefaultMaxConcurrentReconciles workers with the keyed lock, side by side
// in one run. REKEY_BENCH_SETS sets (default 200; 1,000 is the issue's
// figure) are spread over three mysqld on loopback, a tenth of them on
// the black hole; each of the four runs rotates (rotate, then discard once
// Distributed) its own batch of healthy sets (REKEY_BENCH_BATCH, default
// 40) on a fresh manager, and counts the rotations that reach Idle within
// REKEY_BENCH_WINDOW (default 3m). Both designs give up on a login after
// the same 10 s (mysql connectTimeout).
func BenchmarkBlackHole(b *testing.B) {
	n, batch, window := 200, 40, 3*time.Minute
	for _, e := range []struct {
		name string
		v    *int
	}{{"REKEY_BENCH_SETS", &n}, {"REKEY_BENCH_BATCH", &batch}} {
		if s := os.Getenv(e.name); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 {
				b.Fatalf("%s=%q: want a positive number", e.name, s)
			}
			*e.v = v
		}
	}
	if s := os.Getenv("REKEY_BENCH_WINDOW"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	holes := max(n/10, 1)
	healthyN := n - holes
	if healthyN < 4*batch {
		b.Fatalf("%d healthy sets for 4 batches of %d", healthyN, batch)
	}
	cp, k8s := apiServer(b)
	var dbs []string
	for range 3 {
		c := testenv.MySQLClusterForTest(b, testenv.MySQLOptions{NoReplicas: true})
		dbs = append(dbs, c.Primary.Addr())
	}
	hole := blackHoleListener(b)
	ns := "blackhole"
	createNamespace(b, k8s, ns)
	adminSecret(b, k8s, ns)
	all := map[string]string{"bench": "blackhole"}
	healthyOnly := map[string]string{"bench": "blackhole", "hole": "no"}
	tr := newTracker(b, cp.Config, all)

	create := func(name, host, user, isHole string) error {
		lbl := map[string]string{"bench": "blackhole", "hole": isHole}
		return k8s.Create(context.Background(), mysqlSet(ns, name, lbl, []string{host}, []string{user}))
	}
	healthy := make([]setRef, healthyN)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range healthy {
		healthy[i] = setRef{ns, fmt.Sprintf("ok-%04d", i)}
		g.Go(func() error { return create(healthy[i].name, dbs[i%len(dbs)], fmt.Sprintf("ok-%04d", i), "no") })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	m := startManager(b, cp.Config, managerOptions{selector: healthyOnly, concurrency: 8, workers: 4})
	waitAll(b, tr, healthy, provisioned, "provisioning")
	quiesce(b, m, 2*time.Second)
	m.stop()

	type result struct {
		rate      float64
		completed int
		elapsed   time.Duration
	}
	results := map[string]result{}
	seq := 0
	run := func(workers int, withHoles bool) {
		name := fmt.Sprintf("workers=%d/black-hole=%v", workers, withHoles)
		group := healthy[seq*batch : (seq+1)*batch]
		seq++
		sel := healthyOnly
		if withHoles {
			sel = all
		}
		r0, t0 := reconciles(), time.Now()
		m := startManager(b, cp.Config, managerOptions{selector: sel, concurrency: 8, workers: workers})
		defer m.stop()
		if withHoles {
			// The black-hole sets are never quiet: each is retried 10 s
			// after its login gave up 10 s after it began. Measured in
			// that steady state: after the start-up sweep over the
			// healthy sets and at least one full cycle of the black hole
			// (20 s), or 60 s when the black hole holds the sweep up.
			for (reconciles()-r0 < float64(healthyN) || time.Since(t0) < 20*time.Second) && time.Since(t0) < time.Minute {
				time.Sleep(100 * time.Millisecond)
			}
		} else {
			quiesce(b, m, 2*time.Second)
		}
		completed, elapsed := rotateBatch(b, k8s, tr, group, fmt.Sprintf("bh-%d", seq), window)
		r := result{rate: float64(completed) / elapsed.Minutes(), completed: completed, elapsed: elapsed}
		results[name] = r
		b.Logf("%s: %d of %d rotations in %s: %.1f rotations/min", name, completed, len(group), elapsed.Round(time.Millisecond), r.rate)
	}
	b.ResetTimer()
	for range b.N {
		seq = 0
		run(1, false)
		run(controller.DefaultMaxConcurrentReconciles, false)
		// The black-hole sets from here on: created once, never
		// provisioned (each reconcile ends InstanceUnreachable).
		for i := range holes {
			if err := create(fmt.Sprintf("hole-%04d", i), hole, fmt.Sprintf("hole-%04d", i), "yes"); err != nil {
				b.Fatal(err)
			}
		}
		run(controller.DefaultMaxConcurrentReconciles, true)
		// Last: its unfinished rotations must not load another run.
		run(1, true)
	}
	b.StopTimer()
	w := controller.DefaultMaxConcurrentReconciles
	old := results["workers=1/black-hole=true"].rate / results["workers=1/black-hole=false"].rate
	neu := results[fmt.Sprintf("workers=%d/black-hole=true", w)].rate / results[fmt.Sprintf("workers=%d/black-hole=false", w)].rate
	for k, r := range results {
		b.ReportMetric(r.rate, k+"-rotations/min")
	}
	b.ReportMetric(old, "old-1-worker-ratio")
	b.ReportMetric(neu, "new-ratio")
	b.Logf("sets=%d (black hole %d, healthy %d on %d mysqld), batch %d: healthy rotations/min with/without the black hole: 1 worker %.2f, %d workers %.2f",
		n, holes, healthyN, len(dbs), batch, old, w, neu)
}

// rotateBatch requests a rotation of every set at once, a discard as each
// reaches Distributed, and returns how many reached Idle within window and
// the time until the last did (window when not all did).
func rotateBatch(b *testing.B, k8s client.Client, tr *tracker, group []setRef, id string, window time.Duration) (int, time.Duration) {
	b.Helper()
	ctx := context.Background()
	dist := make([]<-chan time.Time, len(group))
	idle := make([]<-chan time.Time, len(group))
	for i, s := range group {
		dist[i] = tr.await(s.ns, s.name, distributed(id))
		idle[i] = tr.await(s.ns, s.name, idleAfter(id))
	}
	t0 := time.Now()
	deadline := t0.Add(window)
	var wg sync.WaitGroup
	var mu sync.Mutex
	completed, last := 0, time.Duration(0)
	sem := make(chan struct{}, 8)
	for i, s := range group {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-dist[i]:
			case <-time.After(time.Until(deadline)):
				return
			}
			sem <- struct{}{}
			err := discardReq(ctx, k8s, s.ns, s.name, id)
			<-sem
			if err != nil {
				b.Error(err)
				return
			}
			select {
			case at := <-idle[i]:
				mu.Lock()
				completed++
				last = max(last, at.Sub(t0))
				mu.Unlock()
			case <-time.After(time.Until(deadline)):
			}
		}()
	}
	eachSet(b, group, func(s setRef) error { return rotateReq(ctx, k8s, s.ns, s.name, id) })
	wg.Wait()
	if completed < len(group) {
		last = window
	}
	return completed, last
}
