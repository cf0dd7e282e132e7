package mysql

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// BenchmarkBatchedPhases times the backend's share of
// trigger → Distributed (Apply: the secondary-slot check and RETAIN on
// every instance) and of discard → Idle (Retire) with 1 and 9 instances,
// every instance behind a 2 ms round trip, the instances in parallel
// (Concurrency 8, as the manager ships), for 8 and 64 users alternating
// inside every iteration so both see the same machine: one statement per
// instance and phase makes 8× the users cost far less than 8× the time.
// (The statement-per-user design it replaced is gone from the product;
// docs/benchmarks.md keeps the figures of the last side-by-side run.)
// Run: go test -run '^$' -bench BatchedPhases -benchtime 3x ./internal/backend/mysql/
func BenchmarkBatchedPhases(b *testing.B) {
	env := testenv.Require(b)
	for _, n := range []int{1, 9} {
		c, err := env.StartMySQLCluster(testenv.MySQLOptions{Replicas: n - 1, NoReplicas: n == 1})
		if err != nil {
			b.Fatal(err)
		}
		proxies := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
		var insts []Instance
		for k, i := range c.Instances() {
			p := toxiproxy.NewProxy(proxies, fmt.Sprintf("p%d", k), "127.0.0.1:0", i.Addr())
			if err := p.Start(); err != nil {
				b.Fatal(err)
			}
			defer p.Stop()
			for _, stream := range []string{"upstream", "downstream"} {
				body := fmt.Sprintf(`{"name":"lat-%s","type":"latency","stream":%q,"attributes":{"latency":1}}`, stream, stream)
				if _, err := p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
					b.Fatal(err)
				}
			}
			insts = append(insts, Instance{Name: i.Name, Addr: p.Listen})
		}
		var backends [2]*Backend
		var cur [2]engine.Secrets
		for k, users := range []int{8, 64} {
			spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: testenv.EnvUser}}
			for u := range users {
				spec.Users = append(spec.Users, v1.MySQLUser{Name: fmt.Sprintf("b%d-%02d", users, u)})
			}
			be, err := New(spec, insts, testenv.EnvPassword, caPEM(b))
			if err != nil {
				b.Fatal(err)
			}
			be.Concurrency = 8
			if cur[k], err = be.NewSecrets(1); err != nil {
				b.Fatal(err)
			}
			if _, err := be.Provision(context.Background(), cur[k]); err != nil {
				b.Fatal(err)
			}
			backends[k] = be
		}
		b.Run(fmt.Sprintf("instances=%d/rtt=2ms", n), func(b *testing.B) {
			benchBatched(b, backends, &cur)
		})
		c.Stop()
	}
}

// benchBatched runs both backends (8 and 64 users) in every iteration.
func benchBatched(b *testing.B, backends [2]*Backend, cur *[2]engine.Secrets) {
	ctx := context.Background()
	var apply, retire [2]time.Duration
	b.ResetTimer()
	for range b.N {
		for k, be := range backends {
			pending, _ := be.NewSecrets(2)
			t0 := time.Now()
			if _, err := be.Apply(ctx, cur[k], pending, 2); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := be.Retire(ctx, cur[k], pending); err != nil {
				b.Fatal(err)
			}
			apply[k] += t1.Sub(t0)
			retire[k] += time.Since(t1)
			cur[k] = pending
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(apply[0]), "8users-rotate-s")
	b.ReportMetric(per(apply[1]), "64users-rotate-s")
	b.ReportMetric(float64(apply[1])/float64(apply[0]), "rotate-64/8")
	b.ReportMetric(per(retire[0]), "8users-discard-s")
	b.ReportMetric(per(retire[1]), "64users-discard-s")
	b.ReportMetric(float64(retire[1])/float64(retire[0]), "discard-64/8")
}
