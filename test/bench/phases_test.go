// Package bench measures rekey's speed goals as ratios taken side by side
// in one run (these machines are noisy): never as timed assertions.
package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mysql"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// BenchmarkInstancePhases times the backend's share of both phases —
// RETAIN on every instance (trigger → Distributed) and DISCARD on every
// instance (discard → Idle) — for the moco preset's 8 users, one instance
// after another and in parallel, alternating in each iteration so both
// modes see the same machine. It reports the seconds of each and the
// speedup (sequential / parallel).
func BenchmarkInstancePhases(b *testing.B) {
	env, err := testenv.Load()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 3, 5, 9} {
		c, err := env.StartMySQLCluster(testenv.MySQLOptions{Replicas: n - 1, NoReplicas: n == 1})
		if err != nil {
			b.Fatal(err)
		}
		// Provisioned once: the framework runs each sub-benchmark more
		// than once, and every run continues from the current passwords.
		cur := provision(b, c)
		for _, rtt := range []time.Duration{0, 2 * time.Millisecond} {
			b.Run(fmt.Sprintf("instances=%d/rtt=%s", n, rtt), func(b *testing.B) {
				benchPhases(b, c, n, rtt, &cur)
			})
		}
		c.Stop()
	}
}

var mocoSpec = &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: testenv.EnvUser}, Preset: "moco"}

// benchCA is the CA of the harness's servers: the backend verifies TLS, as
// it does by default, so the figures include the verification.
func benchCA(b *testing.B) []byte {
	b.Helper()
	ca, err := testenv.MySQLCAPEM()
	if err != nil {
		b.Fatal(err)
	}
	return ca
}

func provision(b *testing.B, c *testenv.MySQLCluster) engine.Secrets {
	var insts []mysql.Instance
	for _, i := range c.Instances() {
		insts = append(insts, mysql.Instance{Name: i.Name, Addr: i.Addr()})
	}
	backend, err := mysql.New(mocoSpec, insts, testenv.EnvPassword, benchCA(b))
	if err != nil {
		b.Fatal(err)
	}
	cur, _ := backend.NewSecrets(1)
	if _, err := backend.Provision(context.Background(), cur); err != nil {
		b.Fatal(err)
	}
	return cur
}

func benchPhases(b *testing.B, c *testenv.MySQLCluster, n int, rtt time.Duration, cur *engine.Secrets) {
	lp := newLatencyProxies()
	defer lp.stop()
	var insts []mysql.Instance
	for _, i := range c.Instances() {
		addr := i.Addr()
		if rtt > 0 {
			var err error
			if addr, err = lp.add(addr, rtt); err != nil {
				b.Fatal(err)
			}
		}
		insts = append(insts, mysql.Instance{Name: i.Name, Addr: addr})
	}
	backend, err := mysql.New(mocoSpec, insts, testenv.EnvPassword, benchCA(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var seqApply, parApply, seqRetire, parRetire time.Duration
	b.ResetTimer()
	for range b.N {
		for k, mode := range []int{1, n} {
			backend.Concurrency = mode
			pending, _ := backend.NewSecrets(2)
			t0 := time.Now()
			if _, err := backend.Apply(ctx, *cur, pending, 2); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := backend.Retire(ctx, *cur, pending); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			*cur = pending
			if k == 0 {
				seqApply, seqRetire = seqApply+t1.Sub(t0), seqRetire+t2.Sub(t1)
			} else {
				parApply, parRetire = parApply+t1.Sub(t0), parRetire+t2.Sub(t1)
			}
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(seqApply), "seq-rotate-s")
	b.ReportMetric(per(parApply), "par-rotate-s")
	b.ReportMetric(per(seqRetire), "seq-discard-s")
	b.ReportMetric(per(parRetire), "par-discard-s")
	b.ReportMetric(float64(seqApply)/float64(parApply), "rotate-speedup")
	b.ReportMetric(float64(seqRetire)/float64(parRetire), "discard-speedup")
}
