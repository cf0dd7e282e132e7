package mysql

import (
	"context"
	"testing"

	"rekey.io/rekey/internal/testenv"
)

// TestSwitchoverStepsOnRealMySQL: the roles the explorer's switchover
// steps model (internal/explorer switchover.go), each made on a real
// primary and replica, and what the health gate decides of each. A
// switchover begins by making the primary super_read_only; then the
// candidate is promoted (STOP REPLICA, RESET REPLICA, writable) and the
// other re-pointed to it, in either order. Until both are done, rotation
// and discard are refused and nothing is lifted or changed; once they
// are, the rotation and its discard run, and every instance holds what
// rekey applied to it (its statements replicate nowhere).
func TestSwitchoverStepsOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{Replicas: 1})
	a, b := c.Primary, c.Replicas[0]
	f := newRepairFixture(t, c, "o")
	held := func(want string) {
		t.Helper()
		wantUnhealthy(t, f.b.Precheck(ctx, f.cur), want, "the rotation does not start")
		wantUnhealthy(t, f.b.CheckDiscardHealth(ctx, f.cur, f.pending), want, "discard")
	}
	exec := func(i *testenv.MySQLInstance, stmts ...string) {
		t.Helper()
		if err := i.Exec(stmts...); err != nil {
			t.Fatal(err)
		}
	}
	promote := func(i *testenv.MySQLInstance) {
		// MOCO's: the channel's settings stay (RESET REPLICA, not ALL).
		exec(i, "STOP REPLICA", "RESET REPLICA", "SET GLOBAL super_read_only=OFF", "SET GLOBAL read_only=OFF")
	}
	repoint := func(i, to *testenv.MySQLInstance) {
		if err := i.ReplicateFrom(to); err != nil {
			t.Fatal(err)
		}
	}

	// a → b, the candidate promoted first.
	exec(a, "SET GLOBAL super_read_only=ON")
	held("as during a switchover")
	promote(b)
	held(a.Name + " is not a replica of the primary " + b.Name)
	wantSuperReadOnly(t, a) // nothing lifted on the instance being demoted
	repoint(a, b)
	a.Role, b.Role = testenv.RoleReplica, testenv.RolePrimary
	if err := f.b.Precheck(ctx, f.cur); err != nil {
		t.Fatalf("precheck once the roles settled (b writable, its reset channel kept): %v", err)
	}
	if _, err := f.b.Apply(ctx, f.cur, f.pending, 2); err != nil {
		t.Fatal(err)
	}
	for _, i := range c.Instances() {
		f.accepts(t, i, true, true)
	}

	// b → a, the others re-pointed first: a and b replicate from each
	// other, neither writable. Made read-only, b's channel from the first
	// switchover (stopped, kept by RESET REPLICA) counts as a stopped
	// replica's: still refused, in those words.
	exec(b, "SET GLOBAL super_read_only=ON")
	held("on " + b.Name + ", replication from " + a.Addr() + ": IO thread is stopped")
	repoint(b, a)
	held("no instance is the primary")
	wantSuperReadOnly(t, a, b)
	for _, i := range c.Instances() {
		f.accepts(t, i, true, true) // the refusals changed nothing
	}
	promote(a)
	a.Role, b.Role = testenv.RolePrimary, testenv.RoleReplica
	if err := f.b.Retire(ctx, f.cur, f.pending); err != nil {
		t.Fatalf("discard once the roles settled: %v", err)
	}
	for _, i := range c.Instances() {
		f.accepts(t, i, false, true)
	}
}
