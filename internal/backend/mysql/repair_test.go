package mysql

import (
	"context"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// repairFixture is two rotated users (app<n>, ops<n>) provisioned by the
// backend on a cluster, connecting as the harness superuser (an unrotated
// admin). Subtests share the cluster, each with its own users.
type repairFixture struct {
	c            *testenv.MySQLCluster
	b            *Backend
	cur, pending engine.Secrets
	app, ops     string
}

func newRepairFixture(t *testing.T, c *testenv.MySQLCluster, n string) *repairFixture {
	t.Helper()
	var insts []Instance
	for _, i := range c.Instances() {
		insts = append(insts, Instance{Name: i.Name, Addr: i.Addr()})
	}
	f := &repairFixture{c: c, app: "app" + n, ops: "ops" + n, cur: engine.Secrets{}, pending: engine.Secrets{}}
	spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: testenv.EnvUser}, Users: []v1.MySQLUser{
		{Name: f.app, Grants: []v1.MySQLGrant{{Privileges: []string{"SELECT", "INSERT"}, Object: "app.*"}}},
		{Name: f.ops, Grants: []v1.MySQLGrant{{Privileges: []string{"PROCESS"}, Object: "*.*"}}},
	}}
	var err error
	if f.b, err = New(spec, insts, testenv.EnvPassword, caPEM(t)); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{f.app, f.ops} {
		f.cur[DefaultKey(u)] = u + "-current-password-0123456789ab"
		f.pending[DefaultKey(u)] = u + "-pending-password-0123456789ab"
	}
	if _, err := f.b.Provision(context.Background(), f.cur); err != nil {
		t.Fatal(err)
	}
	return f
}

// accepts asserts which of cur and pending log in, per user, on inst, and
// that the user has its grants, no creation mark, and inst is still
// super_read_only if it is a replica.
func (f *repairFixture) accepts(t *testing.T, inst *testenv.MySQLInstance, cur, pending bool) {
	t.Helper()
	for _, u := range []string{f.app, f.ops} {
		key := DefaultKey(u)
		for pw, want := range map[string]bool{f.cur[key]: cur, f.pending[key]: pending} {
			if err := inst.CanLogin(u, pw); (err == nil) != want {
				t.Fatalf("%s on %s: login ok=%v, want %v (%v)", u, inst.Name, err == nil, want, err)
			}
		}
		grants, err := inst.QueryString("SELECT GROUP_CONCAT(CONCAT(PRIVILEGE_TYPE,' ',TABLE_SCHEMA)) FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE=?", "'"+u+"'@'%'")
		if err != nil {
			t.Fatal(err)
		}
		global, _ := inst.QueryString("SELECT GROUP_CONCAT(PRIVILEGE_TYPE) FROM information_schema.USER_PRIVILEGES WHERE GRANTEE=?", "'"+u+"'@'%'")
		if (u == f.app && !strings.Contains(grants, "INSERT app")) || (u == f.ops && !strings.Contains(global, "PROCESS")) {
			t.Fatalf("%s on %s lacks its grants: schema %q, global %q", u, inst.Name, grants, global)
		}
		if attrs, _ := inst.QueryString("SELECT COALESCE(CAST(User_attributes AS CHAR), '') FROM mysql.user WHERE User=? AND Host='%'", u); strings.Contains(attrs, `"rekey"`) {
			t.Fatalf("%s on %s still carries the creation mark: %s", u, inst.Name, attrs)
		}
	}
	if inst.Role != testenv.RolePrimary {
		if v, _ := inst.QueryString("SELECT @@GLOBAL.super_read_only"); v != "1" {
			t.Fatalf("%s left with super_read_only=%q", inst.Name, v)
		}
	}
}

// dropUnlogged removes the users from one instance as a re-initialisation
// does, without the minutes a real one takes.
func (f *repairFixture) dropUnlogged(t *testing.T, inst *testenv.MySQLInstance, users ...string) {
	t.Helper()
	stmts := []string{"SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF"}
	for _, u := range users {
		stmts = append(stmts, "DROP USER '"+u+"'@'%'")
	}
	if inst.Role != testenv.RolePrimary {
		stmts = append(stmts, "SET GLOBAL super_read_only=ON")
	}
	if err := inst.Exec(stmts...); err != nil {
		t.Fatal(err)
	}
}

// TestReinitRepairOnRealMySQL: a replica re-initialised from an empty data
// directory mid-rotation is repaired by whichever phase meets it, and ends
// like every other instance.
func TestReinitRepairOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})

	t.Run("Apply creates the users with cur, then retains pending", func(t *testing.T) {
		f := newRepairFixture(t, c, "1")
		r := f.c.Replicas[0]
		if err := r.Reinit(f.c.Primary, testenv.ReinitOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.b.Precheck(ctx, f.cur); err != nil {
			t.Fatalf("precheck with users missing on %s: %v", r.Name, err)
		}
		for range 2 { // a re-run after a crash retains nothing twice
			if _, err := f.b.Apply(ctx, f.cur, f.pending, 2); err != nil {
				t.Fatal(err)
			}
		}
		for _, i := range f.c.Instances() {
			f.accepts(t, i, true, true)
		}
		if err := f.b.Retire(ctx, f.cur, f.pending); err != nil {
			t.Fatal(err)
		}
		for _, i := range f.c.Instances() {
			f.accepts(t, i, false, true)
		}
		assertNoBinlogDDL(t, f.c)
	})

	t.Run("Retire creates missing users with pending only; a creation a crash interrupted is finished", func(t *testing.T) {
		f := newRepairFixture(t, c, "2")
		if _, err := f.b.Apply(ctx, f.cur, f.pending, 2); err != nil {
			t.Fatal(err)
		}
		r := f.c.Replicas[1]
		f.dropUnlogged(t, r, f.app, f.ops)
		// A crash between CREATE USER and its GRANT left app ungranted
		// on replica1, carrying rekey's mark.
		f.dropUnlogged(t, f.c.Replicas[0], f.app)
		if err := f.c.Replicas[0].Exec("SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
			"CREATE USER '"+f.app+"'@'%' IDENTIFIED BY '"+f.pending[DefaultKey(f.app)]+"' ATTRIBUTE "+creatingAttribute,
			"SET GLOBAL super_read_only=ON"); err != nil {
			t.Fatal(err)
		}
		if err := f.b.Retire(ctx, f.cur, f.pending); err != nil {
			t.Fatal(err)
		}
		for _, i := range f.c.Instances() {
			f.accepts(t, i, false, true)
		}
		assertNoBinlogDDL(t, f.c)
	})

	t.Run("Retire refuses to create a user no other instance proves the password of", func(t *testing.T) {
		f := newRepairFixture(t, c, "3")
		if _, err := f.b.Apply(ctx, f.cur, f.pending, 2); err != nil {
			t.Fatal(err)
		}
		f.dropUnlogged(t, f.c.Primary, f.app)
		edited := engine.Secrets{DefaultKey(f.app): "typed-by-hand-into-the-source-secret", DefaultKey(f.ops): f.pending[DefaultKey(f.ops)]}
		f.b.Concurrency = 1 // the primary first
		err := f.b.Retire(ctx, f.cur, edited)
		rf, ok := engine.AsRefusal(err)
		if !ok || rf.Reason != string(reason.DiscardRefused) || !strings.Contains(rf.Message, f.app+"@% does not exist on primary") || !strings.Contains(rf.Message, "can only complete") {
			t.Fatalf("Retire = %v, want a DiscardRefused refusal naming %s on primary and the next step", err, f.app)
		}
		if strings.Contains(err.Error(), edited[DefaultKey(f.app)]) {
			t.Fatal("the refusal carries a password")
		}
		if n, _ := f.c.Primary.QueryString("SELECT COUNT(*) FROM mysql.user WHERE User=?", f.app); n != "0" {
			t.Fatal("Retire created the user anyway")
		}
		// The rollback recreates it with the current password.
		if err := f.b.Reset(ctx, f.cur); err != nil {
			t.Fatal(err)
		}
		for _, i := range f.c.Instances() {
			f.accepts(t, i, true, false)
		}
	})
}

func assertNoBinlogDDL(t *testing.T, c *testenv.MySQLCluster) {
	t.Helper()
	for _, i := range c.Instances() {
		if ddl, err := i.CredentialDDLInBinlog(); err != nil || len(ddl) > 0 {
			t.Fatalf("%s: account statements in the binary log: %v (%v)", i.Name, ddl, err)
		}
	}
}
