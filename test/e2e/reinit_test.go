package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestReinitReplicaMidRotation: a replica loses its data directory mid-
// rotation and is rebuilt (issue 5's fault matrix). rekey's credential DDL
// never reaches a binlog (no propagation), so a replica rebuilt empty replays the
// primary's history without rekey's users; one rebuilt by CLONE has the
// donor's rows. Either way the rotation completes, every instance ends
// accepting exactly the new passwords, the rebuilt replica is
// super_read_only again, and nothing reached any binlog.
//
// What the prober targets: a replica rebuilt from an empty data directory
// has none of the users until rekey repairs it, and nobody can log in
// there in between — the rebuild took the accounts away, not rekey, which
// cannot act on an instance before it answers with its admin account. A
// cluster manager (MOCO) does not route consumers to such an instance
// either. So the prober logs in, with exactly what the distributed Secret
// holds at each moment, on every instance consumers can use: all of them
// until the fault, the others while the replica is being rebuilt, and the
// rebuilt one again from the moment rekey has repaired it (when phase 1
// reaches it, at discard, which re-checks every instance first, or at
// once after a CLONE, which brings the donor's accounts). Every failed
// login counts: none of those instances is ever stopped.
func TestReinitReplicaMidRotation(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{Downstream: true})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	downUsers, primaryGTID := userTable(t, c.Downstream), gtidExecuted(t, c.Primary)
	// The consumer pods log in where the prober does (see above).
	targets := &probeTargets{insts: c.Instances()}
	set := mocoSet(t, ns, "reinit", c)
	deployConsumers(t, set, mocoKeys, targets.list)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "reinit", v1.PhaseIdle, 1)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")
	seen := []map[string]string{old} // every generation, for the leak scan
	p := targetProber(t, ns, "reinit-creds", targets)
	r1, r2 := c.Replicas[0], c.Replicas[1]

	// adminBootstrap is what the cluster's bootstrap creates on a new
	// instance (MOCO's init creates moco-admin): the admin account, with
	// the password consumers hold now.
	adminBootstrap := func() []string {
		pw := string(secretData(t, ns, "reinit-creds")["ADMIN_PASSWORD"])
		return []string{fmt.Sprintf("CREATE USER 'moco-admin'@'%%' IDENTIFIED BY '%s'", pw),
			"GRANT ALL PRIVILEGES ON *.* TO 'moco-admin'@'%' WITH GRANT OPTION"}
	}
	// completed checks the end of every rotation.
	completed := func(t *testing.T, gen int64, cur map[string]string, rebuilt *testenv.MySQLInstance) map[string]string {
		t.Helper()
		cs := waitPhase(t, ns, "reinit", v1.PhaseIdle, gen)
		now := userPasswords(sourceData(t, cs), mocoKeys, "")
		seen = append(seen, now)
		loginMatrix(t, fmt.Sprintf("Idle at generation %d", gen), c.Instances(), now, cur)
		assertNoDualPassword(t, c)
		assertSuperReadOnly(t, r1, r2, c.Downstream)
		if err := rebuilt.WaitCaughtUp(c.Primary); err != nil {
			t.Fatal(err)
		}
		if got := gtidExecuted(t, rebuilt); got != gtidExecuted(t, c.Primary) {
			t.Fatalf("%s gtid_executed %q differs from the primary's: something was logged there", rebuilt.Name, got)
		}
		return now
	}

	t.Run("rebuilt from an empty data directory while Rotating", func(t *testing.T) {
		// Phase 1 is held on r1 (a global read lock blocks its ALTER USER)
		// so that r1 is lost with every other instance already applied.
		holdGlobalReadLock(t, r1)
		rotate(t, ns, "reinit", "reinit-1")
		eventually(t, time.Minute, "phase 1 applied elsewhere, blocked on "+r1.Name, func() (bool, string) {
			n, _ := r1.QueryString("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER='moco-admin' AND STATE LIKE '%global read lock%'")
			cs := getSet(t, ns, "reinit")
			return n != "0" && n != "" && cs.Status.Phase == v1.PhaseRotating, stateOf(cs)
		})
		targets.remove(r1)
		r1.Stop() // the replica is lost
		mk := matrixMark(t, p, "replica re-initialised (fresh data directory) while Rotating")
		mustContain(t, "InstanceUnreachable event", waitEventNoting(t, ns, "reinit", reason.InstanceUnreachable, r1.Addr()), "resumes by itself")
		if cs := getSet(t, ns, "reinit"); cs.Status.Phase != v1.PhaseRotating || cs.Status.RotateApplied {
			t.Fatalf("phase 1 went past the lost replica: %s", stateOf(cs))
		}
		if got := userPasswords(secretData(t, ns, "reinit-creds"), mocoKeys, ""); !equalMaps(got, old) {
			t.Fatal("distributed before every instance applied the new passwords")
		}
		if err := r1.Reinit(c.Primary, testenv.ReinitOptions{Bootstrap: adminBootstrap()}); err != nil {
			t.Fatal(err)
		}
		mk.resume()
		cs := waitPhase(t, ns, "reinit", v1.PhaseDistributed, 1)
		mk.reached()
		pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
		// Repaired in phase 1 like every other instance: old and new.
		loginMatrix(t, "Distributed: new passwords", c.Instances(), pend, nil)
		loginMatrix(t, "Distributed: old passwords", c.Instances(), old, nil)
		targets.add(r1)
		discard(t, ns, "reinit", "reinit-1")
		old = completed(t, 2, old, r1)
		mk.done(t, "held (InstanceUnreachable) while it was down; phase 1 created its users with the old password and retained the new one; completed, only the new passwords log in")
	})

	t.Run("rebuilt from an empty data directory while Distributed, its admin recreated late", func(t *testing.T) {
		rotate(t, ns, "reinit", "reinit-2")
		waitPhase(t, ns, "reinit", v1.PhaseDistributed, 2)
		targets.remove(r2)
		mk := matrixMark(t, p, "replica re-initialised (fresh data directory) while Distributed, admin account recreated late")
		if err := r2.Reinit(c.Primary, testenv.ReinitOptions{}); err != nil {
			t.Fatal(err)
		}
		discard(t, ns, "reinit", "reinit-2")
		mustContain(t, "AuthenticationFailed event", waitEventNoting(t, ns, "reinit", reason.AuthenticationFailed, r2.Addr()), "re-initialised", "moco-admin", "MySQL error 1045")
		if cs := getSet(t, ns, "reinit"); cs.Status.Phase != v1.PhaseDistributed || cs.Status.DiscardApplied {
			t.Fatalf("discard completed without the rebuilt replica: %s", stateOf(cs))
		}
		onEachInstance(t, []*testenv.MySQLInstance{r2}, adminBootstrap()...)
		mk.resume()
		annotate(t, ns, "reinit", "test.rekey.io/touch", "admin-recreated") // rather than wait for the backoff
		waitPhase(t, ns, "reinit", v1.PhaseIdle, 3)
		mk.reached()
		old = completed(t, 3, old, r2)
		targets.add(r2)
		mk.done(t, "discard held (AuthenticationFailed naming the instance and its missing admin) until the admin was recreated; then its users were created with the new password only; completed")
	})

	t.Run("rebuilt by CLONE from the primary while Distributed", func(t *testing.T) {
		rotate(t, ns, "reinit", "reinit-3")
		cs := waitPhase(t, ns, "reinit", v1.PhaseDistributed, 3)
		pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
		targets.remove(r1)
		mk := matrixMark(t, p, "replica re-initialised by CLONE from the primary while Distributed")
		if err := r1.Reinit(c.Primary, testenv.ReinitOptions{Clone: true}); err != nil {
			t.Fatal(err)
		}
		// The donor's rows came along, secondary passwords included.
		loginMatrix(t, "after the clone", []*testenv.MySQLInstance{r1}, pend, nil)
		loginMatrix(t, "after the clone", []*testenv.MySQLInstance{r1}, old, nil)
		targets.add(r1)
		mk.resume()
		discard(t, ns, "reinit", "reinit-3")
		waitPhase(t, ns, "reinit", v1.PhaseIdle, 4)
		mk.reached()
		completed(t, 4, old, r1)
		mk.done(t, "the clone brought the donor's accounts (old and new log in); discard treated it like any instance; completed")
	})

	p.assertNoGap(t)
	for _, i := range append(c.Instances(), c.Downstream) {
		if ddl, err := i.CredentialDDLInBinlog(); err != nil || len(ddl) > 0 {
			t.Fatalf("%s: credential DDL in the binary log: %v (%v)", i.Name, ddl, err)
		}
	}
	if got := gtidExecuted(t, c.Primary); got != primaryGTID {
		t.Fatalf("primary gtid_executed moved from %q to %q: something was binlogged", primaryGTID, got)
	}
	if err := c.Downstream.WaitCaughtUp(c.Primary); err != nil {
		t.Fatal(err)
	}
	if userTable(t, c.Downstream) != downUsers {
		t.Fatal("the downstream cluster's mysql.user changed: credential DDL travelled by binlog")
	}
	assertNoSecretLeaked(t, ns, "reinit", seen...)
}

// holdGlobalReadLock takes FLUSH TABLES WITH READ LOCK on i until the
// test ends or i stops: reads and logins go on, account changes wait.
func holdGlobalReadLock(t *testing.T, i *testenv.MySQLInstance) {
	t.Helper()
	db, err := i.DB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(context.Background(), "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatal(err)
	}
}

// waitEventNoting waits for an Event with reason about the set whose note
// mentions part, and returns the note.
func waitEventNoting(t *testing.T, ns, name string, why reason.Reason, part string) string {
	t.Helper()
	note := ""
	waitFor(t, time.Minute, fmt.Sprintf("event %s on %s mentioning %s", why, name, part), func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == string(why) && strings.Contains(e.Note, part) {
				note = e.Note
				return true, ""
			}
		}
		return false, stateOf(getSet(t, ns, name))
	})
	observed(t, "event %s naming %s", why, part)
	return note
}

// probeTargets are the instances a targetProber logs in to; they change
// while it runs.
type probeTargets struct {
	mu     sync.Mutex
	insts  []*testenv.MySQLInstance
	rounds atomic.Int64
}

func (pt *probeTargets) list() []*testenv.MySQLInstance {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return slices.Clone(pt.insts)
}

func (pt *probeTargets) add(i *testenv.MySQLInstance) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.insts = append(pt.insts, i)
}

// remove takes i out and returns once no login to it is in flight.
func (pt *probeTargets) remove(i *testenv.MySQLInstance) {
	pt.mu.Lock()
	pt.insts = slices.DeleteFunc(pt.insts, func(x *testenv.MySQLInstance) bool { return x == i })
	pt.mu.Unlock()
	start := pt.rounds.Load()
	for deadline := time.Now().Add(time.Minute); pt.rounds.Load() < start+2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// targetProber is startProber over targets that change: every login with
// what the distributed Secret holds, on every current target, counts.
func targetProber(t testing.TB, ns, secret string, targets *probeTargets) *prober {
	return probeLoop(t, ns, secret, mocoKeys, targets.list, nil, func() { targets.rounds.Add(1) })
}
