package bench

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/testenv"
)

// rtt is the round trip the latency proxies add between the operator (and
// the load's clients) and each instance.
const rtt = 2 * time.Millisecond

// BenchmarkRotationEndToEnd times what a user waits for: trigger →
// Distributed and discard → Idle as seen on the API server, with the real
// controller (an in-process manager configured as cmd/manager) against a
// real kube-apiserver, and every instance behind a 2 ms round trip. For
// each cluster size and user count, two sets on the same cluster are
// rotated in turn by two managers — one sequential
// (--instance-concurrency=1), one parallel (8) — so the ratio is taken side
// by side on the same machine. It also counts, per full rotation (rotate +
// discard), the API requests the manager sent and its reconciles.
func BenchmarkRotationEndToEnd(b *testing.B) {
	cp, k8s := apiServer(b)
	env := testenv.Require(b)
	tr := newTracker(b, cp.Config, map[string]string{"bench": "e2e"})
	seq := 0
	for _, n := range []int{1, 3, 5, 9} {
		c, err := env.StartMySQLCluster(testenv.MySQLOptions{Replicas: n - 1, NoReplicas: n == 1})
		if err != nil {
			b.Fatal(err)
		}
		lp := newLatencyProxies()
		var hosts []string
		for _, addr := range c.Addrs() {
			p, err := lp.add(addr, rtt)
			if err != nil {
				b.Fatal(err)
			}
			hosts = append(hosts, p)
		}
		ns := fmt.Sprintf("e2e-%d", n)
		createNamespace(b, k8s, ns)
		adminSecret(b, k8s, ns)
		lbl := func(mode string) map[string]string {
			return map[string]string{"bench": "e2e", "instances": strconv.Itoa(n), "mode": mode}
		}
		mgrs := [2]*manager{
			startManager(b, cp.Config, managerOptions{selector: lbl("seq"), concurrency: 1}),
			startManager(b, cp.Config, managerOptions{selector: lbl("par"), concurrency: 8}),
		}
		for _, u := range []int{8, 64} {
			var names [2]string
			for k, mode := range []string{"seq", "par"} {
				names[k] = fmt.Sprintf("%s-u%d", mode, u)
				var users []string
				for i := range u {
					users = append(users, fmt.Sprintf("%s%d-%02d", mode[:1], u, i))
				}
				if err := k8s.Create(context.Background(), mysqlSet(ns, names[k], lbl(mode), hosts, users)); err != nil {
					b.Fatal(err)
				}
			}
			for k := range names {
				tr.wait(b, tr.await(ns, names[k], provisioned), 5*time.Minute, ns, names[k], "provisioning")
			}
			b.Run(fmt.Sprintf("instances=%d/users=%d", n, u), func(b *testing.B) {
				benchEndToEnd(b, k8s, tr, ns, names, mgrs, &seq)
			})
		}
		for _, m := range mgrs {
			m.stop()
		}
		lp.stop()
		c.Stop()
	}
}

// cycleCost is what one mode spent over the iterations.
type cycleCost struct {
	rotate, discard             time.Duration
	requests, writes, reconcile float64
	busy, iowait                float64 // machine-wide %, trigger → Idle
}

func benchEndToEnd(b *testing.B, k8s client.Client, tr *tracker, ns string, names [2]string, mgrs [2]*manager, seq *int) {
	ctx := context.Background()
	var cost [2]cycleCost
	b.ResetTimer()
	for range b.N {
		for k := range names {
			m, name := mgrs[k], names[k]
			quiesce(b, m, 300*time.Millisecond)
			*seq++
			id := fmt.Sprintf("bench-%d", *seq)
			req0, wr0, rec0, kinds0 := m.requests.total.Load(), m.requests.writes.Load(), reconciles(), m.requests.kinds()

			toDistributed := tr.await(ns, name, distributed(id))
			cpu0 := sampleCPU()
			t0 := time.Now()
			if err := rotateReq(ctx, k8s, ns, name, id); err != nil {
				b.Fatal(err)
			}
			tD := tr.wait(b, toDistributed, 5*time.Minute, ns, name, "Distributed")

			toIdle := tr.await(ns, name, idleAfter(id))
			t1 := time.Now()
			if err := discardReq(ctx, k8s, ns, name, id); err != nil {
				b.Fatal(err)
			}
			tI := tr.wait(b, toIdle, 5*time.Minute, ns, name, "Idle")
			use := cpu0.until(sampleCPU())
			cost[k].busy += use.busy
			cost[k].iowait += use.iowait

			quiesce(b, m, 300*time.Millisecond)
			cost[k].rotate += tD.Sub(t0)
			cost[k].discard += tI.Sub(t1)
			cost[k].requests += float64(m.requests.total.Load() - req0)
			cost[k].writes += float64(m.requests.writes.Load() - wr0)
			cost[k].reconcile += reconciles() - rec0
			if k == 1 {
				b.Logf("one rotation's requests (parallel manager): %s", m.requests.kindsSince(kinds0))
			}
		}
	}
	b.StopTimer()
	n := float64(b.N)
	s, p := cost[0], cost[1]
	b.ReportMetric(s.rotate.Seconds()/n, "seq-rotate-s")
	b.ReportMetric(p.rotate.Seconds()/n, "par-rotate-s")
	b.ReportMetric(float64(s.rotate)/float64(p.rotate), "rotate-speedup")
	b.ReportMetric(s.discard.Seconds()/n, "seq-discard-s")
	b.ReportMetric(p.discard.Seconds()/n, "par-discard-s")
	b.ReportMetric(float64(s.discard)/float64(p.discard), "discard-speedup")
	b.ReportMetric(p.requests/n, "api-req/rotation")
	b.ReportMetric(p.writes/n, "api-writes/rotation")
	b.ReportMetric(p.reconcile/n, "reconciles/rotation")
	b.ReportMetric(s.requests/n, "seq-api-req/rotation")
	b.ReportMetric(s.reconcile/n, "seq-reconciles/rotation")
	b.ReportMetric(s.busy/n, "seq-cpu-busy-%")
	b.ReportMetric(p.busy/n, "par-cpu-busy-%")
	b.ReportMetric(p.iowait/n, "par-iowait-%")
}
