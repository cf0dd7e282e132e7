package mysql

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// rtAdmin is the (not rotated) account the round-trip tests' backends
// connect as.
const (
	rtAdmin         = "rt-admin"
	rtAdminPassword = "rt-admin-password-0123456789abcdef"
)

// requests is, per instance, how many requests clients sent it that
// MySQL answers — statements (Questions) and statement preparations
// (Com_stmt_prepare, which Questions leaves out), less one quit per
// connection (Connections: Questions counts COM_QUIT, which gets no
// answer) — and how many ALTER USER statements ran. So the login checks
// of Retire, a connection per user, add nothing to the count: what is
// left is what the backend's sessions asked. The cluster is this test's
// own, so only the backend and this function talk to it; this function's
// own statement and connection add the same to every reading. A client's
// closing quit may reach the server after the client returned (seen under
// load: one request counted in the next phase), so the reading waits until
// no other client connection is left (bounded: a connection the harness
// keeps would only make it wait).
func requests(t *testing.T, c *testenv.MySQLCluster) map[string][2]int {
	t.Helper()
	out := map[string][2]int{}
	for _, i := range c.Instances() {
		db, err := i.DB()
		if err != nil {
			t.Fatal(err)
		}
		polls := 0 // each a statement Questions counts, taken off below
		for range 100 {
			polls++
			var others int
			if err := db.QueryRow("SELECT COUNT(*) FROM performance_schema.processlist WHERE ID <> CONNECTION_ID() " +
				"AND USER NOT IN ('system user', 'event_scheduler') AND COMMAND NOT IN ('Daemon', 'Binlog Dump', 'Binlog Dump GTID')").Scan(&others); err != nil {
				t.Fatal(err)
			}
			if others == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		rows, err := db.Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_stmt_prepare', 'Connections', 'Com_alter_user')")
		if err != nil {
			t.Fatal(err)
		}
		n := [2]int{-polls, 0}
		for rows.Next() {
			var name string
			var v int
			if err := rows.Scan(&name, &v); err != nil {
				t.Fatal(err)
			}
			switch name {
			case "Com_alter_user":
				n[1] = v
			case "Connections":
				n[0] -= v
			default:
				n[0] += v
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		db.Close()
		out[i.Name] = n
	}
	return out
}

// createRTAdmin creates rtAdmin on every instance, unlogged (as rekey's
// own DDL: assertNoBinlogDDL holds).
func createRTAdmin(t *testing.T, c *testenv.MySQLCluster) {
	t.Helper()
	for _, i := range c.Instances() {
		stmts := []string{"SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
			"CREATE USER '" + rtAdmin + "'@'%' IDENTIFIED BY '" + rtAdminPassword + "'",
			"GRANT ALL ON *.* TO '" + rtAdmin + "'@'%' WITH GRANT OPTION"}
		if i.Role != testenv.RolePrimary {
			stmts = append(stmts, "SET GLOBAL super_read_only=ON")
		}
		if err := i.Exec(stmts...); err != nil {
			t.Fatal(err)
		}
	}
}

// rtBackend is a backend for users named prefix0…prefix<n-1>, connecting
// as rtAdmin.
func rtBackend(t *testing.T, c *testenv.MySQLCluster, prefix string, n int) (*Backend, engine.Secrets, engine.Secrets) {
	t.Helper()
	var insts []Instance
	for _, i := range c.Instances() {
		insts = append(insts, Instance{Name: i.Name, Addr: i.Addr()})
	}
	spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: rtAdmin}}
	cur, pending := engine.Secrets{}, engine.Secrets{}
	for k := range n {
		name := fmt.Sprintf("%s%d", prefix, k)
		spec.Users = append(spec.Users, v1.MySQLUser{Name: name})
		cur[DefaultKey(name)] = name + "-current-password-0123456789ab"
		pending[DefaultKey(name)] = name + "-pending-password-0123456789ab"
	}
	b, err := New(spec, insts, rtAdminPassword, caPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Provision(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	return b, cur, pending
}

// TestOneRequestPerInstancePerPhaseOnRealMySQL: with 8
// users, each phase sends each instance one ALTER USER, and the number of
// requests a phase sends an instance does not grow with the users: the
// same for 8 users as for 1 (the statement-per-user design it replaced
// sent one ALTER USER and two more requests per user: docs/benchmarks.md
// keeps its figures). Counted by the server itself
// (its status counters), not timed.
func TestOneRequestPerInstancePerPhaseOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	createRTAdmin(t, c)
	type phase struct {
		name string
		run  func(b *Backend, cur, pending engine.Secrets) error
	}
	phases := []phase{
		{"rotate (Apply)", func(b *Backend, cur, pending engine.Secrets) error {
			_, err := b.Apply(ctx, cur, pending, 2)
			return err
		}},
		{"discard (Retire)", func(b *Backend, cur, pending engine.Secrets) error { return b.Retire(ctx, cur, pending) }},
		{"rollback (Reset)", func(b *Backend, cur, pending engine.Secrets) error { return b.Reset(ctx, pending) }},
	}
	// measure runs every phase with n users and returns, per phase and
	// instance, the requests and ALTER USERs it sent.
	measure := func(prefix string, n int) [][]int {
		b, cur, pending := rtBackend(t, c, prefix, n)
		var out [][]int
		for _, p := range phases {
			before := requests(t, c)
			if err := p.run(b, cur, pending); err != nil {
				t.Fatalf("%s with %d users: %v", p.name, n, err)
			}
			after := requests(t, c)
			var row []int
			for _, i := range c.Instances() {
				row = append(row, after[i.Name][0]-before[i.Name][0], after[i.Name][1]-before[i.Name][1])
			}
			out = append(out, row)
		}
		for _, i := range c.Instances() {
			for k := range n {
				name := fmt.Sprintf("%s%d", prefix, k)
				if err := i.CanLogin(name, pending[DefaultKey(name)]); err != nil {
					t.Fatalf("%s on %s does not accept the password of the reset: %v", name, i.Name, err)
				}
			}
		}
		return out
	}
	one, eight := measure("rt-one-", 1), measure("rt-new-", 8)
	for p, ph := range phases {
		for k, i := range c.Instances() {
			reqs1, reqs8, alters8 := one[p][2*k], eight[p][2*k], eight[p][2*k+1]
			t.Logf("%s on %s: 8 users: %d requests, %d ALTER USER (1 user: %d requests)", ph.name, i.Name, reqs8, alters8, reqs1)
			wantAlters := 1
			if ph.name == "rollback (Reset)" {
				wantAlters = 2 // IDENTIFIED BY cur, then DISCARD OLD PASSWORD
			}
			if alters8 != wantAlters {
				t.Errorf("%s on %s: %d ALTER USER statements for 8 users, want %d", ph.name, i.Name, alters8, wantAlters)
			}
			if reqs8 != reqs1 {
				t.Errorf("%s on %s: %d requests for 8 users, %d for 1: the requests grow with the users", ph.name, i.Name, reqs8, reqs1)
			}
		}
	}
	assertNoBinlogDDL(t, c)
}

// TestFailingUserReportedByNameOnRealMySQL: when MySQL refuses one user's
// RETAIN (here: an empty password cannot be retained), the one statement
// for all users changes nothing; each user is then altered alone, so the
// others get their new password, the error names the user that failed and
// MySQL's reason (its error number, in rekey's words), and holds no
// password. A re-run once it is fixed retains
// only that user: the others keep their old password (never a second
// RETAIN).
func TestFailingUserReportedByNameOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	createRTAdmin(t, c)
	b, cur, pending := rtBackend(t, c, "fu-", 8)
	bad, where := "fu-5", c.Replicas[0]
	if err := where.Exec("SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
		"ALTER USER '"+bad+"'@'%' IDENTIFIED BY ''", "SET GLOBAL super_read_only=ON"); err != nil {
		t.Fatal(err)
	}
	_, err := b.Apply(ctx, cur, pending, 2)
	if err == nil {
		t.Fatal("Apply succeeded although MySQL refuses to retain the empty password of " + bad)
	}
	msg := err.Error()
	t.Logf("Apply: %v", err)
	if !strings.Contains(msg, "'"+bad+"'@'%'") || !strings.Contains(msg, where.Name) || !strings.Contains(msg, "MySQL error 3878 (an empty password cannot be retained") {
		t.Fatalf("the error does not say which user failed where, and why: %v", err)
	}
	for _, s := range []engine.Secrets{cur, pending} {
		for _, pw := range s {
			if strings.Contains(msg, pw) {
				t.Fatal("the error holds a password")
			}
		}
	}
	for _, i := range c.Instances() {
		for k := range 8 {
			name := fmt.Sprintf("fu-%d", k)
			okCur := i.CanLogin(name, cur[DefaultKey(name)]) == nil
			okPend := i.CanLogin(name, pending[DefaultKey(name)]) == nil
			failed := name == bad && i == where
			if failed && okPend {
				t.Fatalf("%s on %s accepts the new password although its RETAIN failed", name, i.Name)
			}
			if !failed && (!okCur || !okPend) {
				t.Fatalf("%s on %s: current ok=%v, new ok=%v; want both (only %s failed)", name, i.Name, okCur, okPend, bad)
			}
		}
	}
	// Fixed by hand (the current password again): the re-run retains it
	// alone; the others already have a secondary and are not named.
	if err := where.Exec("SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
		"ALTER USER '"+bad+"'@'%' IDENTIFIED BY '"+cur[DefaultKey(bad)]+"'", "SET GLOBAL super_read_only=ON"); err != nil {
		t.Fatal(err)
	}
	before := requests(t, c)
	if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
		t.Fatal(err)
	}
	after := requests(t, c)
	for _, i := range c.Instances() {
		want := 0
		if i == where {
			want = 1
		}
		if n := after[i.Name][1] - before[i.Name][1]; n != want {
			t.Fatalf("re-run on %s: %d ALTER USER, want %d", i.Name, n, want)
		}
		for k := range 8 {
			name := fmt.Sprintf("fu-%d", k)
			for _, pw := range []string{cur[DefaultKey(name)], pending[DefaultKey(name)]} {
				if err := i.CanLogin(name, pw); err != nil {
					t.Fatalf("after the re-run %s on %s refuses a password: %v", name, i.Name, err)
				}
			}
		}
	}
	if err := b.Retire(ctx, cur, pending); err != nil {
		t.Fatal(err)
	}
	assertNoBinlogDDL(t, c)
}
