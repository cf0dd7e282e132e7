package mysql

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestTopologyOnRealMySQL: the health gate and the super_read_only restore
// against a real primary and two replicas, one cluster for every subtest
// (the switchover, which changes the roles, comes last).
func TestTopologyOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	p, r1, r2 := c.Primary, c.Replicas[0], c.Replicas[1]

	t.Run("a stopped SQL thread holds rotation and discard until it runs again", func(t *testing.T) {
		f := newRepairFixture(t, c, "h")
		if err := r1.Exec("STOP REPLICA SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		err := f.b.Precheck(ctx, f.cur)
		wantUnhealthy(t, err, r1.Name, "SQL thread is stopped")
		// The gate only reads: the replicas stay super_read_only.
		wantSuperReadOnly(t, r1, r2)
		if err := r1.Exec("START REPLICA SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		if err := f.b.Precheck(ctx, f.cur); err != nil {
			t.Fatalf("precheck once replication runs again: %v", err)
		}
		if _, err := f.b.Apply(ctx, f.cur, f.pending, 2); err != nil {
			t.Fatal(err)
		}

		if err := r2.Exec("STOP REPLICA SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		wantUnhealthy(t, f.b.CheckDiscardHealth(ctx, f.cur, f.pending), r2.Name, "SQL thread is stopped", "discard")
		wantUnhealthy(t, f.b.Retire(ctx, f.cur, f.pending), r2.Name, "SQL thread is stopped", "discard")
		for _, i := range c.Instances() {
			f.accepts(t, i, true, true) // nothing discarded anywhere
		}
		if err := r2.Exec("START REPLICA SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		if err := f.b.Retire(ctx, f.cur, f.pending); err != nil {
			t.Fatalf("discard once replication runs again: %v", err)
		}
		for _, i := range c.Instances() {
			f.accepts(t, i, false, true)
		}
	})

	t.Run("a replica that replicates from nothing holds the rotation", func(t *testing.T) {
		f := newRepairFixture(t, c, "t")
		if err := r2.Exec("STOP REPLICA", "RESET REPLICA ALL"); err != nil {
			t.Fatal(err)
		}
		wantUnhealthy(t, f.b.Precheck(ctx, f.cur), r2.Name+" is not a replica of the primary "+p.Name)
		if err := r2.ReplicateFrom(p); err != nil {
			t.Fatal(err)
		}
		if err := f.b.Precheck(ctx, f.cur); err != nil {
			t.Fatalf("precheck once the replica is back in the topology: %v", err)
		}
	})

	// MOCO's switchover begins by making the primary super_read_only and
	// waiting for a replica to catch up; until one is promoted, no
	// instance is writable and the replicas still replicate from the old
	// primary. A rotation or discard starting then would lift
	// super_read_only on the instance being demoted.
	t.Run("a switchover under way holds rotation and discard until a primary is writable", func(t *testing.T) {
		f := newRepairFixture(t, c, "w")
		if err := p.Exec("SET GLOBAL super_read_only=ON"); err != nil {
			t.Fatal(err)
		}
		wantUnhealthy(t, f.b.Precheck(ctx, f.cur), "no instance is writable", p.Name)
		wantUnhealthy(t, f.b.CheckDiscardHealth(ctx, f.cur, f.pending), "no instance is writable", "discard")
		wantUnhealthy(t, f.b.Retire(ctx, f.cur, f.pending), "no instance is writable", "discard")
		// Nothing lifted, nothing changed.
		wantSuperReadOnly(t, p, r1, r2)
		for _, i := range c.Instances() {
			f.accepts(t, i, true, false)
		}
		if err := p.Exec("SET GLOBAL super_read_only=OFF", "SET GLOBAL read_only=OFF"); err != nil {
			t.Fatal(err)
		}
		if err := f.b.Precheck(ctx, f.cur); err != nil {
			t.Fatalf("precheck once the primary is writable again: %v", err)
		}
		if _, err := f.b.Apply(ctx, f.cur, f.pending, 2); err != nil {
			t.Fatalf("rotate once the primary is writable again: %v", err)
		}
		for _, i := range c.Instances() {
			f.accepts(t, i, true, true)
		}
	})

	// A switchover while rekey holds super_read_only lifted on a replica
	// (its ALTER USER waits behind a global read lock): the replica is
	// promoted under rekey's session. When the session closes, rekey must
	// see the new role and leave the new primary writable.
	t.Run("switchover mid-phase leaves the new primary writable", func(t *testing.T) {
		f := newRepairFixture(t, c, "s")
		if err := p.Exec("CREATE DATABASE IF NOT EXISTS app", "CREATE TABLE IF NOT EXISTS app.t (v VARCHAR(64))"); err != nil {
			t.Fatal(err)
		}
		for _, r := range c.Replicas {
			if err := r.WaitCaughtUp(p); err != nil {
				t.Fatal(err)
			}
		}
		release := globalReadLock(t, r1)
		applied := make(chan error, 1)
		go func() { _, err := f.b.Apply(ctx, f.cur, f.pending, 2); applied <- err }()
		waitFor(t, "rekey lifted super_read_only on "+r1.Name, func() bool {
			v, err := r1.QueryString("SELECT @@GLOBAL.super_read_only")
			return err == nil && v == "0"
		})
		// The switchover, as a cluster manager does it: the old primary
		// turns read-only, replica1 stops replicating and turns writable,
		// the others replicate from it.
		if err := p.Exec("SET GLOBAL super_read_only=ON"); err != nil {
			t.Fatal(err)
		}
		if err := r1.Exec("STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL super_read_only=OFF", "SET GLOBAL read_only=OFF"); err != nil {
			t.Fatal(err)
		}
		for _, r := range []*testenv.MySQLInstance{p, r2} {
			if err := r.ReplicateFrom(r1); err != nil {
				t.Fatal(err)
			}
		}
		// The harness's record of the roles follows (f.accepts reads it).
		r1.Role, p.Role = testenv.RolePrimary, testenv.RoleReplica
		release()
		select {
		case err := <-applied:
			if err != nil {
				t.Fatalf("apply across the switchover: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("apply did not finish after the lock was released")
		}
		newPrimaryWritable(t, f, r1, []*testenv.MySQLInstance{p, r2}, f.cur)
		if err := f.b.Retire(ctx, f.cur, f.pending); err != nil {
			t.Fatalf("discard after the switchover: %v", err)
		}
		newPrimaryWritable(t, f, r1, []*testenv.MySQLInstance{p, r2}, f.pending)
		for _, i := range c.Instances() {
			f.accepts(t, i, false, true)
		}
	})
}

// newPrimaryWritable asserts the roles after the switchover: the new
// primary takes a write by the application user (with the password in
// pw), which reaches the others; they are super_read_only.
func newPrimaryWritable(t *testing.T, f *repairFixture, newPrimary *testenv.MySQLInstance, others []*testenv.MySQLInstance, pw engine.Secrets) {
	t.Helper()
	for _, q := range []string{"SELECT @@GLOBAL.read_only", "SELECT @@GLOBAL.super_read_only"} {
		if v, err := newPrimary.QueryString(q); err != nil || v != "0" {
			t.Fatalf("new primary %s: %s = %q (%v), want 0: rekey made it read-only", newPrimary.Name, q, v, err)
		}
	}
	db, err := sql.Open("mysql", newPrimary.DSN(f.app, pw[DefaultKey(f.app)]))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("INSERT INTO app.t VALUES ('written by the application')"); err != nil {
		t.Fatalf("the application user cannot write on the new primary %s: %v", newPrimary.Name, err)
	}
	wantSuperReadOnly(t, others...)
	for _, o := range others {
		if err := o.WaitCaughtUp(newPrimary); err != nil {
			t.Fatal(err)
		}
	}
}

func wantUnhealthy(t *testing.T, err error, parts ...string) {
	t.Helper()
	rf, ok := engine.AsRefusal(err)
	if !ok || rf.Reason != string(reason.ClusterUnhealthy) {
		t.Fatalf("got %v, want a %s refusal", err, reason.ClusterUnhealthy)
	}
	for _, p := range parts {
		if !strings.Contains(rf.Message, p) {
			t.Fatalf("refusal does not say %q: %s", p, rf.Message)
		}
	}
}

func wantSuperReadOnly(t *testing.T, insts ...*testenv.MySQLInstance) {
	t.Helper()
	for _, i := range insts {
		if v, err := i.QueryString("SELECT @@GLOBAL.super_read_only"); err != nil || v != "1" {
			t.Fatalf("%s: super_read_only = %q (%v), want 1", i.Name, v, err)
		}
	}
}

// globalReadLock holds FLUSH TABLES WITH READ LOCK on i, so that rekey's
// credential statements there wait after its session lifted
// super_read_only: the middle of a phase, held open. release unlocks.
func globalReadLock(t *testing.T, i *testenv.MySQLInstance) (release func()) {
	t.Helper()
	db, err := i.DB()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			conn.ExecContext(context.Background(), "UNLOCK TABLES")
			conn.Close()
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting until %s", what)
}
