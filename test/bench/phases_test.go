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
// trigger → Distributed (Apply: RETAIN on every instance; then Verify: every
// user logs in on every instance before the distribution Secrets change)
// and discard → Idle (Retire: DISCARD on every instance) — for the moco
// preset's 8 users and for 64 users, one instance after another and in
// parallel, alternating in each iteration so both modes see the same
// machine. It reports the seconds of each and the speedup (sequential /
// parallel); the 9-instance vs 1-instance ratio is read across
// sub-benchmarks of one run. A cluster is started only for the instance
// counts the -bench pattern selects, e.g.
// -bench 'InstancePhases/instances=(1|9)/users=(8|64)/rtt=2ms' -benchtime 1x.
func BenchmarkInstancePhases(b *testing.B) {
	env, err := testenv.Load()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 3, 5, 9} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			c, err := env.StartMySQLCluster(testenv.MySQLOptions{Replicas: n - 1, NoReplicas: n == 1})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Stop()
			for _, users := range []int{8, 64} {
				spec := usersSpec(users)
				// Provisioned once: the framework runs each
				// sub-benchmark more than once, and every run
				// continues from the current passwords.
				cur := provision(b, c, spec)
				for _, rtt := range []time.Duration{0, 2 * time.Millisecond} {
					b.Run(fmt.Sprintf("users=%d/rtt=%s", users, rtt), func(b *testing.B) {
						benchPhases(b, c, spec, n, rtt, &cur)
					})
				}
			}
		})
	}
}

// usersSpec is the moco preset (8 users, MOCO's grants) for 8 users, and
// as many plain users otherwise.
func usersSpec(n int) *v1.MySQLSpec {
	if n == 8 {
		return mocoSpec
	}
	spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: testenv.EnvUser}}
	for k := range n {
		spec.Users = append(spec.Users, v1.MySQLUser{Name: fmt.Sprintf("bench-%02d", k)})
	}
	return spec
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

func provision(b *testing.B, c *testenv.MySQLCluster, spec *v1.MySQLSpec) engine.Secrets {
	var insts []mysql.Instance
	for _, i := range c.Instances() {
		insts = append(insts, mysql.Instance{Name: i.Name, Addr: i.Addr()})
	}
	backend, err := mysql.New(spec, insts, testenv.EnvPassword, benchCA(b))
	if err != nil {
		b.Fatal(err)
	}
	cur, _ := backend.NewSecrets(1)
	if _, err := backend.Provision(context.Background(), cur); err != nil {
		b.Fatal(err)
	}
	return cur
}

func benchPhases(b *testing.B, c *testenv.MySQLCluster, spec *v1.MySQLSpec, n int, rtt time.Duration, cur *engine.Secrets) {
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
	backend, err := mysql.New(spec, insts, testenv.EnvPassword, benchCA(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var seqApply, parApply, seqVerify, parVerify, seqRetire, parRetire time.Duration
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
			if err := backend.Verify(ctx, pending); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			if err := backend.Retire(ctx, *cur, pending); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			*cur = pending
			if k == 0 {
				seqApply, seqVerify, seqRetire = seqApply+t1.Sub(t0), seqVerify+t2.Sub(t1), seqRetire+t3.Sub(t2)
			} else {
				parApply, parVerify, parRetire = parApply+t1.Sub(t0), parVerify+t2.Sub(t1), parRetire+t3.Sub(t2)
			}
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(seqApply), "seq-rotate-s")
	b.ReportMetric(per(parApply), "par-rotate-s")
	b.ReportMetric(per(seqVerify), "seq-verify-s")
	b.ReportMetric(per(parVerify), "par-verify-s")
	b.ReportMetric(per(seqRetire), "seq-discard-s")
	b.ReportMetric(per(parRetire), "par-discard-s")
	b.ReportMetric(float64(seqApply)/float64(parApply), "rotate-speedup")
	b.ReportMetric(float64(seqVerify)/float64(parVerify), "verify-speedup")
	b.ReportMetric(float64(seqRetire)/float64(parRetire), "discard-speedup")
}
