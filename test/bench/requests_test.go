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
func BenchmarkAPIRequests(b *testing.B) {
	cp, k8s := apiServer(b)
	c := testenv.MySQLClusterForTest(b, testenv.MySQLOptions{NoReplicas: true})
	ns, lbl := "requests", map[string]string{"bench": "requests"}
	createNamespace(b, k8s, ns)
	adminSecret(b, k8s, ns)
	var users []string
	for i := range 8 {
		users = append(users, fmt.Sprintf("req-%d", i))
	}
	tr := newTracker(b, cp.Config, lbl)
	m := startManager(b, cp.Config, managerOptions{selector: lbl, concurrency: 8, workers: 4})
	ctx := context.Background()
	if err := k8s.Create(ctx, mysqlSet(ns, "app", lbl, []string{c.Primary.Addr()}, users)); err != nil {
		b.Fatal(err)
	}
	tr.wait(b, tr.await(ns, "app", provisioned), 2*time.Minute, ns, "app", "provisioning")
	var requests, writes, recs float64
	b.ResetTimer()
	for i := range b.N {
		quiesce(b, m, 300*time.Millisecond)
		id := fmt.Sprintf("req-%d", i)
		req0, wr0, rec0, kinds0 := m.requests.total.Load(), m.requests.writes.Load(), reconciles(), m.requests.kinds()
		toDistributed := tr.await(ns, "app", distributed(id))
		if err := rotateReq(ctx, k8s, ns, "app", id); err != nil {
			b.Fatal(err)
		}
		tr.wait(b, toDistributed, 2*time.Minute, ns, "app", "Distributed")
		toIdle := tr.await(ns, "app", idleAfter(id))
		if err := discardReq(ctx, k8s, ns, "app", id); err != nil {
			b.Fatal(err)
		}
		tr.wait(b, toIdle, 2*time.Minute, ns, "app", "Idle")
		quiesce(b, m, 300*time.Millisecond)
		requests += float64(m.requests.total.Load() - req0)
		writes += float64(m.requests.writes.Load() - wr0)
		recs += reconciles() - rec0
		b.Logf("rotation %d: %d requests in %v reconciles: %s", i, m.requests.total.Load()-req0, reconciles()-rec0, m.requests.kindsSince(kinds0))
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(requests/n, "api-req/rotation")
	b.ReportMetric(writes/n, "api-writes/rotation")
	b.ReportMetric(recs/n, "reconciles/rotation")
}
