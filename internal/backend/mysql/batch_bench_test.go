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
// 8 and 64 users, every instance behind a 2 ms round trip, the instances
// in parallel (Concurrency 8, as the manager ships) — for the design
// before (perUser: a statement per user) and the batched one,
// alternating inside every iteration so both see the same machine. It
// lives in the package because the old design is selectable only here.
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
		for _, users := range []int{8, 64} {
			var backends [2]*Backend
			var cur [2]engine.Secrets
			for k, perUser := range []bool{true, false} {
				spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: testenv.EnvUser}}
				for u := range users {
					spec.Users = append(spec.Users, v1.MySQLUser{Name: fmt.Sprintf("b%d-%d-%02d", k, users, u)})
				}
				be, err := New(spec, insts, testenv.EnvPassword, caPEM(b))
				if err != nil {
					b.Fatal(err)
				}
				be.perUser, be.Concurrency = perUser, 8
				if cur[k], err = be.NewSecrets(1); err != nil {
					b.Fatal(err)
				}
				if _, err := be.Provision(context.Background(), cur[k]); err != nil {
					b.Fatal(err)
				}
				backends[k] = be
			}
			b.Run(fmt.Sprintf("instances=%d/users=%d/rtt=2ms", n, users), func(b *testing.B) {
				benchBatched(b, backends, &cur)
			})
		}
		c.Stop()
	}
}

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
	b.ReportMetric(per(apply[0]), "old-rotate-s")
	b.ReportMetric(per(apply[1]), "new-rotate-s")
	b.ReportMetric(float64(apply[1])/float64(apply[0]), "rotate-new/old")
	b.ReportMetric(per(retire[0]), "old-discard-s")
	b.ReportMetric(per(retire[1]), "new-discard-s")
	b.ReportMetric(float64(retire[1])/float64(retire[0]), "discard-new/old")
}
