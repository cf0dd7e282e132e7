package e2e

import (
	"context"
	"database/sql"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// TestSwitchoverMidPhase: the primary moves to a replica in the middle of
// phase 1, while rekey's session on that replica has super_read_only
// lifted (its ALTER USER waits behind a global read lock). When the
// session closes, rekey reads the role again: the new primary stays
// writable — the application writes to it — and the demoted primary and
// the other replica stay super_read_only, through Distributed and discard.
func TestSwitchoverMidPhase(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	if err := k8s.Create(ctxT(t), mocoSet(t, ns, "swm", c)); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "swm", v1.PhaseIdle, 1)
	oldPrimary, newPrimary, other := c.Primary, c.Replicas[0], c.Replicas[1]
	if err := oldPrimary.Exec("CREATE DATABASE swm", "CREATE TABLE swm.t (v VARCHAR(64))"); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Replicas {
		if err := r.WaitCaughtUp(oldPrimary); err != nil {
			t.Fatal(err)
		}
	}
	mk := matrixMark(t, loginProber(t, c.Instances(), ns, "swm-creds"), "switchover in the middle of phase 1 (super_read_only lifted on the replica being promoted)")

	release := heldReadLock(t, newPrimary)
	rotate(t, ns, "swm", "swm-1")
	eventually(t, time.Minute, "rekey's session on "+newPrimary.Name+" lifted super_read_only mid-phase", func() (bool, string) {
		sro, err := newPrimary.QueryString("SELECT @@GLOBAL.super_read_only")
		cs := getSet(t, ns, "swm")
		return err == nil && sro == "0" && cs.Status.Phase == v1.PhaseRotating && !cs.Status.RotateApplied, "super_read_only=" + sro + " " + stateOf(cs)
	})

	// The switchover: the old primary turns read-only, replica1 stops
	// replicating and turns writable, the others replicate from it.
	if err := testenv.Switchover(oldPrimary, newPrimary, other); err != nil {
		t.Fatal(err)
	}
	release()
	mk.resume()
	waitPhase(t, ns, "swm", v1.PhaseDistributed, 1)
	mk.reached()
	applicationWrites(t, ns, "swm-creds", newPrimary, oldPrimary, other)

	discard(t, ns, "swm", "swm-1")
	waitPhase(t, ns, "swm", v1.PhaseIdle, 2)
	applicationWrites(t, ns, "swm-creds", newPrimary, oldPrimary, other)
	mk.done(t, "completed: the promoted replica stayed writable (the application wrote to it), the demoted primary and the other replica super_read_only")
}

// applicationWrites asserts the roles after the switchover: the new
// primary has read_only and super_read_only off and takes a write by the
// application user with the password it is given (the distribution
// Secret); the write replicates to the others, which are super_read_only.
func applicationWrites(t *testing.T, ns, secret string, primary *testenv.MySQLInstance, replicas ...*testenv.MySQLInstance) {
	t.Helper()
	for _, q := range []string{"SELECT @@GLOBAL.read_only", "SELECT @@GLOBAL.super_read_only"} {
		if v, err := primary.QueryString(q); err != nil || v != "0" {
			t.Fatalf("new primary %s: %s = %q (%v), want 0: rekey made it read-only", primary.Name, q, v, err)
		}
	}
	pw := string(secretData(t, ns, secret)["WRITABLE_PASSWORD"])
	db, err := sql.Open("mysql", primary.DSN("moco-writable", pw))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("INSERT INTO swm.t VALUES ('written by the application')"); err != nil {
		t.Fatalf("moco-writable cannot write on the new primary %s: %v", primary.Name, err)
	}
	assertSuperReadOnly(t, replicas...)
	for _, r := range replicas {
		if err := r.WaitCaughtUp(primary); err != nil {
			t.Fatal(err)
		}
	}
}

// heldReadLock holds FLUSH TABLES WITH READ LOCK on i until release: rekey's
// credential statements there wait after its session lifted
// super_read_only, which holds the phase open in its middle.
func heldReadLock(t *testing.T, i *testenv.MySQLInstance) (release func()) {
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
	released := false
	release = func() {
		if !released {
			released = true
			conn.ExecContext(context.Background(), "UNLOCK TABLES")
			conn.Close()
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}
