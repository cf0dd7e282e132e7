package mysql

import (
	"context"
	"fmt"
	"testing"

	"rekey.io/rekey/internal/testenv"
)

// TestErrantOnRealMySQL: rekey's own statements (sql_log_bin=0) leave
// gtid_executed alone on every instance; a transaction a DBA writes on a
// replica by hand makes it errant, which holds the discard and the next
// rotation, with a refusal naming the replica, its GTID and what to run;
// once the DBA marks the GTID executed on the primary, both go ahead.
func TestErrantOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	p, r1 := c.Primary, c.Replicas[0]
	gtids := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, i := range c.Instances() {
			v, err := i.QueryString("SELECT @@GLOBAL.gtid_executed")
			if err != nil {
				t.Fatal(err)
			}
			out[i.Name] = v
		}
		return out
	}
	before := gtids()
	f := newRepairFixture(t, c, "e") // provisions the users on every instance
	if err := f.b.Precheck(ctx, f.cur); err != nil {
		t.Fatalf("precheck on a fresh cluster: %v", err)
	}
	if _, err := f.b.Apply(ctx, f.cur, f.pending, 2); err != nil {
		t.Fatal(err)
	}
	after := gtids()
	for _, i := range c.Instances() {
		if before[i.Name] != after[i.Name] {
			t.Fatalf("%s: gtid_executed %q before rekey's CREATE USER and ALTER USER ... RETAIN, %q after", i.Name, before[i.Name], after[i.Name])
		}
	}
	t.Logf("gtid_executed unchanged by provision and apply: %v", after)

	// A DBA's statement on the replica itself, with binary logging on.
	if err := r1.Exec("SET GLOBAL super_read_only=OFF", "CREATE DATABASE errant_by_hand", "SET GLOBAL super_read_only=ON"); err != nil {
		t.Fatal(err)
	}
	uuid, err := r1.QueryString("SELECT @@GLOBAL.server_uuid")
	if err != nil {
		t.Fatal(err)
	}
	errant, err := r1.QueryString("SELECT GTID_SUBTRACT(@@GLOBAL.gtid_executed, ?)", gtids()[p.Name])
	if err != nil || errant != uuid+":1" {
		t.Fatalf("errant set on %s: %q (%v), want %s:1", r1.Name, errant, err, uuid)
	}
	parts := []string{r1.Name + " holds transactions the primary " + p.Name + " does not (errant GTIDs " + errant + ")",
		"SET GTID_NEXT='" + errant + "'; BEGIN; COMMIT; SET GTID_NEXT='AUTOMATIC'"}
	wantUnhealthy(t, f.b.CheckDiscardHealth(ctx, f.cur, f.pending), append(parts, "discard")...)
	wantUnhealthy(t, f.b.Retire(ctx, f.cur, f.pending), append(parts, "discard")...)
	for _, i := range c.Instances() {
		f.accepts(t, i, true, true) // nothing discarded anywhere
	}
	wantUnhealthy(t, f.b.Precheck(ctx, f.pending), append(parts, "the rotation does not start")...)

	// The DBA keeps the database and marks its GTID executed on the
	// primary with an empty transaction, which the other replica receives.
	stale := gtids()[p.Name]
	markExecuted(t, p, errant)
	if err := c.Replicas[1].WaitCaughtUp(p); err != nil {
		t.Fatal(err)
	}
	if err := f.b.Retire(ctx, f.cur, f.pending); err != nil {
		t.Fatalf("discard once the primary holds the errant GTID: %v", err)
	}
	for _, i := range c.Instances() {
		f.accepts(t, i, false, true)
	}
	if err := f.b.Precheck(ctx, f.pending); err != nil {
		t.Fatalf("precheck once the primary holds the errant GTID: %v", err)
	}

	// The primary's set read before a replica's can lack what the replica
	// received from it since (here the empty transaction, of another
	// server's uuid): read again, it holds it, and nothing is refused.
	obs, err := f.b.observeAll(ctx, "health/instance-observed", f.b.adminPasswords(f.pending, nil), f.pending, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range obs {
		if obs[i].Name == p.Name {
			obs[i].GTIDExecuted = stale
		}
	}
	if errantSuspect(obs) != p.Name {
		t.Fatalf("a replica ahead of the primary's stale set is not suspected: %+v", obs)
	}
	if err := f.b.rereadPrimary(ctx, obs, f.b.adminPasswords(f.pending, nil), f.pending); err != nil {
		t.Fatal(err)
	}
	if rf := decideHealth(rotationPhase, obs); rf != nil {
		t.Fatalf("refused after the primary's set was read again: %s", rf.Message)
	}
}

// markExecuted runs an empty transaction for each GTID of set on inst, as
// a DBA marks an errant transaction executed on the primary; GTIDs inst
// already executed are skipped.
func markExecuted(t *testing.T, inst *testenv.MySQLInstance, set string) {
	t.Helper()
	g, err := parseGTIDSet(set)
	if err != nil {
		t.Fatal(err)
	}
	done, err := inst.QueryString("SELECT @@GLOBAL.gtid_executed")
	if err != nil {
		t.Fatal(err)
	}
	have, err := parseGTIDSet(done)
	if err != nil {
		t.Fatal(err)
	}
	for src, ivs := range g.minus(have) {
		for _, iv := range ivs {
			for n := iv.lo; n <= iv.hi; n++ {
				gtid := fmt.Sprintf("%s:%d", src, n)
				if err := inst.Exec("SET GTID_NEXT='"+gtid+"'", "BEGIN", "COMMIT", "SET GTID_NEXT='AUTOMATIC'"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}
