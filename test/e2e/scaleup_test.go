package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestScaleUpMidRotation (issue 20 item 2): the StatefulSet holding the
// instances is scaled up while a rotation is under way, and the new pod's
// mysqld comes with the mysql.user rows of the donor it was CLONEd from —
// as MOCO seeds a new replica — taken either before the donor applied
// phase 1 (its users accept only the old passwords) or after (both). The
// instances are the StatefulSet's ordinals (db-0 is the primary, db-1 and
// db-2 replicas, db-3 the pod the scale-up adds: the cluster's third
// replica, outside the StatefulSet until then), read live by rekey on
// every reconcile.
//
//   - raised while Rotating, phase 1 in flight (held on db-2), the new pod
//     cloned before RETAIN: the phase 1 that was running listed three
//     instances; the fourth must accept the new passwords before any
//     consumer is handed them;
//   - raised while Distributed, cloned after RETAIN: it accepts both at
//     once and consumers use it from the start;
//   - raised while Distributed, cloned before RETAIN, its mysqld
//     answering only after the scale (as a new pod's does): rekey reports
//     it unreachable, then repairs it within one reconcile of answering.
//   - raised while the discard runs (held on db-2), cloned after RETAIN:
//     the discard that was running listed three instances; the set must
//     not go Idle with the old passwords still valid on the fourth.
//
// Consumers are pods that read the Secret at start and log in round-robin
// over every instance that serves; the new pod serves from the moment it
// is in the StatefulSet and answers, except in the last case, where its
// users accept only passwords consumers no longer hold until rekey
// repaired it (a cluster manager does not route consumers to a pod that
// is not ready; the test measures how long the repair took after it
// answered). The prober logs in with whatever the Secret holds at each
// moment on the same instances. Not one login may be refused; every
// rotation ends with the new pod's users matching the others' and nothing
// in any binary log.
func TestScaleUpMidRotation(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{Replicas: 3})
	ns := newNamespace(t)
	primaryGTID := gtidExecuted(t, c.Primary)
	r2, fresh := c.Replicas[1], c.Replicas[2]
	members := c.Instances()[:3]

	// db-3 is fresh: the StatefulSet starts at 3 replicas.
	stsManager(t, ns, c)
	targets := &probeTargets{insts: members}
	set := mocoSet(t, ns, "grow", c)
	set.Spec.MySQL.Instances = v1.MySQLInstances{StatefulSet: &v1.StatefulSetInstances{Name: "db"}}
	set.Spec.MySQL.TLSServerName = testenv.MySQLTLSName
	deployConsumers(t, set, mocoKeys, targets.list)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "grow", v1.PhaseIdle, 1)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")
	seen := []map[string]string{old}
	p := targetProber(t, ns, "grow-creds", targets)

	// cloneFresh seeds the instance the scale-up adds from the primary,
	// as MOCO clones a new replica from its donor.
	cloneFresh := func(t *testing.T, when string) {
		t.Helper()
		if err := fresh.Reinit(c.Primary, testenv.ReinitOptions{Clone: true}); err != nil {
			t.Fatal(err)
		}
		observed(t, "db-3 cloned from the primary %s", when)
	}
	// completed checks the end of a rotation with db-3 a member, then
	// scales it away again (while Idle) for the next case.
	completed := func(t *testing.T, gen int64, prev map[string]string) map[string]string {
		t.Helper()
		cs := waitPhase(t, ns, "grow", v1.PhaseIdle, gen)
		now := userPasswords(sourceData(t, cs), mocoKeys, "")
		seen = append(seen, now)
		loginMatrix(t, fmt.Sprintf("Idle at generation %d, db-3 included", gen), c.Instances(), now, prev)
		assertNoDualPassword(t, c)
		assertSameAccounts(t, c)
		assertSuperReadOnly(t, c.Replicas...)
		targets.remove(fresh)
		scale(t, ns, "db", 3)
		return now
	}

	t.Run("raised while Rotating, phase 1 in flight, cloned before RETAIN", func(t *testing.T) {
		cloneFresh(t, "before the rotation (its users accept only the current passwords)")
		loginMatrix(t, "db-3 after the clone", []*testenv.MySQLInstance{fresh}, old, nil)
		// Phase 1 is held on db-2 (a global read lock blocks its ALTER
		// USER), so that the scale-up lands while it runs over the three
		// instances it listed.
		release := globalReadLock(t, r2)
		rotate(t, ns, "grow", "grow-1")
		eventually(t, time.Minute, "phase 1 running, blocked on db-2", func() (bool, string) {
			n, _ := r2.QueryString("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER='moco-admin' AND STATE LIKE '%global read lock%'")
			cs := getSet(t, ns, "grow")
			return n != "0" && n != "" && cs.Status.Phase == v1.PhaseRotating, stateOf(cs)
		})
		mk := matrixMark(t, p, "StatefulSet scaled up while Rotating (phase 1 in flight), new pod cloned before RETAIN")
		scale(t, ns, "db", 4)
		// The new pod is ready: it answers and replicates. Consumers hold
		// the current passwords, which it accepts.
		targets.add(fresh)
		time.Sleep(time.Second) // the scale-up is seen while phase 1 still waits
		release()
		mk.resume()
		cs := waitPhase(t, ns, "grow", v1.PhaseDistributed, 1)
		mk.reached()
		pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
		loginMatrix(t, "Distributed: new passwords, db-3 included", c.Instances(), pend, nil)
		loginMatrix(t, "Distributed: old passwords, db-3 included", c.Instances(), old, nil)
		assertSameAccounts(t, c)
		time.Sleep(2 * time.Second) // both generations of consumers on db-3
		discard(t, ns, "grow", "grow-1")
		old = completed(t, 2, old)
		mk.done(t, "the instance added while phase 1 ran accepted the new passwords before consumers were given them; completed with it")
	})

	t.Run("raised while Distributed, cloned after RETAIN", func(t *testing.T) {
		rotate(t, ns, "grow", "grow-2")
		cs := waitPhase(t, ns, "grow", v1.PhaseDistributed, 2)
		pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
		mk := matrixMark(t, p, "StatefulSet scaled up while Distributed, new pod cloned after RETAIN")
		cloneFresh(t, "while Distributed (its users have both passwords)")
		scale(t, ns, "db", 4)
		targets.add(fresh)
		loginMatrix(t, "db-3 after the clone: new passwords", []*testenv.MySQLInstance{fresh}, pend, nil)
		loginMatrix(t, "db-3 after the clone: old passwords", []*testenv.MySQLInstance{fresh}, old, nil)
		time.Sleep(2 * time.Second)
		discard(t, ns, "grow", "grow-2")
		old = completed(t, 3, old)
		mk.done(t, "the clone brought both passwords; discard retired the old one there like everywhere; completed")
	})

	t.Run("raised while Distributed, cloned before RETAIN, answering after the scale", func(t *testing.T) {
		cloneFresh(t, "before the rotation (its users accept only the current passwords)")
		// Its pod is not running yet when the StatefulSet is scaled.
		fresh.Stop()
		rotate(t, ns, "grow", "grow-3")
		cs := waitPhase(t, ns, "grow", v1.PhaseDistributed, 3)
		pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
		mk := matrixMark(t, p, "StatefulSet scaled up while Distributed, new pod cloned before RETAIN, answering after the scale")
		answered := watchAnswerAgain(t, fresh)
		scale(t, ns, "db", 4)
		mustContain(t, "InstanceUnreachable event of the repair",
			waitEventNoting(t, ns, "grow", reason.InstanceUnreachable, "db-3"), "both the old and the new passwords", "resumes by itself")
		if err := fresh.Start(); err != nil {
			t.Fatal(err)
		}
		mk.resume()
		up := answered()
		var repaired time.Time
		eventually(t, time.Minute, "db-3 accepts the old and the new passwords of every user", func() (bool, string) {
			for u, pw := range pend {
				if err := fresh.CanLogin(u, pw); err != nil {
					return false, fmt.Sprintf("db-3 refuses the new password of %s: %v", u, err)
				}
				if err := fresh.CanLogin(u, old[u]); err != nil {
					return false, fmt.Sprintf("db-3 refuses the old password of %s: %v", u, err)
				}
			}
			repaired = time.Now()
			return true, ""
		})
		took := repaired.Sub(up)
		t.Logf("repair of db-3: answered at %s, every user accepted old and new at %s: %.1f s after it answered",
			up.Format("15:04:05.000"), repaired.Format("15:04:05.000"), took.Seconds())
		mk.saw("new pod repaired %.1f s after it answered (bound %s)", took.Seconds(), repairBound)
		if took > repairBound {
			t.Errorf("db-3 was repaired %.1f s after it answered, later than the recheck allows (%s)", took.Seconds(), repairBound)
		}
		mk.reached()
		if cs := getSet(t, ns, "grow"); cs.Status.Phase != v1.PhaseDistributed || cs.Status.DiscardStarted {
			t.Fatalf("repaired by something other than the Distributed repair: %s", stateOf(cs))
		}
		targets.add(fresh)
		assertSameAccounts(t, c)
		time.Sleep(2 * time.Second)
		discard(t, ns, "grow", "grow-3")
		old = completed(t, 4, old)
		mk.done(t, fmt.Sprintf("InstanceUnreachable naming it until its mysqld answered; repaired %.1f s after it answered; completed with it", took.Seconds()))
	})

	t.Run("raised while the discard runs, cloned after RETAIN", func(t *testing.T) {
		gen := getSet(t, ns, "grow").Status.KeyGeneration
		rotate(t, ns, "grow", "grow-4")
		waitPhase(t, ns, "grow", v1.PhaseDistributed, gen)
		cloneFresh(t, "while Distributed (its users have both passwords)")
		// The discard is held on db-2, so that the scale-up lands while
		// it runs over the three instances it listed.
		release := globalReadLock(t, r2)
		discard(t, ns, "grow", "grow-4")
		eventually(t, time.Minute, "discard running, blocked on db-2", func() (bool, string) {
			n, _ := r2.QueryString("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER='moco-admin' AND STATE LIKE '%global read lock%'")
			cs := getSet(t, ns, "grow")
			return n != "0" && n != "" && cs.Status.DiscardStarted, stateOf(cs)
		})
		mk := matrixMark(t, p, "StatefulSet scaled up while the discard runs (held on db-2), new pod cloned after RETAIN")
		scale(t, ns, "db", 4)
		targets.add(fresh)
		time.Sleep(time.Second)
		release()
		mk.resume()
		// Idle only with the old passwords discarded on db-3 too: the
		// next rotation's precheck would otherwise refuse its secondary.
		old = completed(t, gen+1, old)
		mk.done(t, "the instance added while the discard ran had its old passwords discarded too before Idle; completed with it")
	})

	p.assertNoGap(t)
	if err := fresh.WaitCaughtUp(c.Primary); err != nil {
		t.Fatal(err)
	}
	for _, i := range c.Instances() {
		if ddl, err := i.CredentialDDLInBinlog(); err != nil || len(ddl) > 0 {
			t.Fatalf("%s: credential DDL in the binary log: %v (%v)", i.Name, ddl, err)
		}
		if got := gtidExecuted(t, i); got != primaryGTID {
			t.Fatalf("%s gtid_executed %q differs from the primary's at the start %q: something was binlogged", i.Name, got, primaryGTID)
		}
	}
	observed(t, "no credential DDL in any binary log; gtid_executed unchanged everywhere")
	assertNoSecretLeaked(t, ns, "grow", seen...)
}

// globalReadLock takes FLUSH TABLES WITH READ LOCK on i; the function it
// returns (also run when the test ends) releases it.
func globalReadLock(t testing.TB, i *testenv.MySQLInstance) func() {
	t.Helper()
	db, err := i.DB()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			conn.ExecContext(context.Background(), "UNLOCK TABLES")
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(release)
	return release
}
