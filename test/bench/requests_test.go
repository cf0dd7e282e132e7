package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"rekey.io/rekey/internal/testenv"
)

// BenchmarkAPIRequests counts what one full rotation (rotate + discard)
// costs the API server: the requests the manager sends (by verb and
// resource) and its reconciles, from just before the trigger until the
// manager has been quiet for 300 ms after Idle. One set of 8 users on one
// mysqld on loopback, no consumers: the count does not depend on the
// backend's size (BenchmarkRotationEndToEnd counts the same for 1-9
// instances and 8-64 users), so this is the quick way to see it.
//
// (Until the design that read the set and its Secrets live in every
// reconcile was removed from the product, a second manager ran it side by
// side: 32.2 requests a rotation against 20.8.)
func BenchmarkAPIRequests(b *testing.B) {
	cp, k8s := apiServer(b)
	c := testenv.MySQLClusterForTest(b, testenv.MySQLOptions{NoReplicas: true})
	ns, lbl := "requests", map[string]string{"bench": "requests"}
	createNamespace(b, k8s, ns)
	adminSecret(b, k8s, ns)
	tr := newTracker(b, cp.Config, lbl)
	ctx := context.Background()
	type design struct {
		name, set              string
		m                      *manager
		requests, writes, recs float64
	}
	designs := []*design{{name: "now", set: "app"}}
	for _, d := range designs {
		sel := map[string]string{"bench": "requests", "design": d.name}
		d.m = startManager(b, cp.Config, managerOptions{selector: sel, concurrency: 8, workers: 4})
		var users []string
		for i := range 8 {
			users = append(users, fmt.Sprintf("%s-req-%d", d.name, i))
		}
		if err := k8s.Create(ctx, mysqlSet(ns, d.set, sel, []string{c.Primary.Addr()}, users)); err != nil {
			b.Fatal(err)
		}
		tr.wait(b, tr.await(ns, d.set, provisioned), 2*time.Minute, ns, d.set, "provisioning")
	}
	b.ResetTimer()
	for i := range b.N {
		for _, d := range designs {
			for _, q := range designs {
				quiesce(b, q.m, 300*time.Millisecond)
			}
			m := d.m
			id := fmt.Sprintf("req-%d", i)
			req0, wr0, rec0, kinds0 := m.requests.total.Load(), m.requests.writes.Load(), reconciles(), m.requests.kinds()
			toDistributed := tr.await(ns, d.set, distributed(id))
			if err := rotateReq(ctx, k8s, ns, d.set, id); err != nil {
				b.Fatal(err)
			}
			tr.wait(b, toDistributed, 2*time.Minute, ns, d.set, "Distributed")
			toIdle := tr.await(ns, d.set, idleAfter(id))
			if err := discardReq(ctx, k8s, ns, d.set, id); err != nil {
				b.Fatal(err)
			}
			tr.wait(b, toIdle, 2*time.Minute, ns, d.set, "Idle")
			quiesce(b, m, 300*time.Millisecond)
			d.requests += float64(m.requests.total.Load() - req0)
			d.writes += float64(m.requests.writes.Load() - wr0)
			d.recs += reconciles() - rec0
			b.Logf("%s: rotation %d: %d requests in %v reconciles: %s", d.name, i, m.requests.total.Load()-req0, reconciles()-rec0, m.requests.kindsSince(kinds0))
		}
	}
	b.StopTimer()
	n := float64(b.N)
	for _, d := range designs {
		b.ReportMetric(d.requests/n, "api-req/rotation")
		b.ReportMetric(d.writes/n, "api-writes/rotation")
		b.ReportMetric(d.recs/n, "reconciles/rotation")
	}
}
