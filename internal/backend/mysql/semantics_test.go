package mysql

import (
	"testing"

	"rekey.io/rekey/internal/testenv"
)

// TestPasswordSemanticsOnRealMySQL proves on a real mysqld the behaviours
// the state-space explorer's model of MySQL encodes
// (internal/explorer/mysqlmodel.go): one secondary slot per user, which a
// second RETAIN takes from the original; IDENTIFIED BY without RETAIN
// replaces the primary and keeps the secondary; DISCARD OLD PASSWORD drops
// it; and credential DDL
// run with sql_log_bin=0 stays on the instance it ran on.
func TestPasswordSemanticsOnRealMySQL(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	p, r := c.Primary, c.Replicas[0]
	const user = "semantics"
	pw := func(s string) string { return "Pw" + s + "x9ZqLmNoPqRsTuVwXyZ0123456789" }
	alter := func(clause string) {
		t.Helper()
		if err := p.Exec("SET SESSION sql_log_bin=0", "ALTER USER '"+user+"'@'%' "+clause); err != nil {
			t.Fatal(err)
		}
	}
	accepts := func(i *testenv.MySQLInstance, when string, ok, refused []string) {
		t.Helper()
		for _, s := range ok {
			if err := i.CanLogin(user, pw(s)); err != nil {
				t.Errorf("%s: %s refuses password %s: %v", when, i.Name, s, err)
			}
		}
		for _, s := range refused {
			if i.CanLogin(user, pw(s)) == nil {
				t.Errorf("%s: %s still accepts password %s", when, i.Name, s)
			}
		}
	}
	for _, i := range c.Instances() {
		stmts := []string{"SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
			"CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + pw("a") + "'"}
		if i != p {
			stmts = append(stmts, "SET GLOBAL super_read_only=ON")
		}
		if err := i.Exec(stmts...); err != nil {
			t.Fatal(err)
		}
	}

	alter("IDENTIFIED BY '" + pw("b") + "' RETAIN CURRENT PASSWORD")
	accepts(p, "after one RETAIN", []string{"a", "b"}, nil)
	alter("IDENTIFIED BY '" + pw("c") + "' RETAIN CURRENT PASSWORD")
	accepts(p, "after a second RETAIN", []string{"b", "c"}, []string{"a"})
	alter("IDENTIFIED BY '" + pw("d") + "'")
	// The primary is replaced; the secondary (b) stays.
	accepts(p, "after IDENTIFIED BY without RETAIN", []string{"b", "d"}, []string{"c"})
	alter("DISCARD OLD PASSWORD")
	accepts(p, "after DISCARD OLD PASSWORD", []string{"d"}, []string{"b"})

	if err := p.Exec("CREATE DATABASE IF NOT EXISTS semantics_marker"); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitCaughtUp(p); err != nil {
		t.Fatal(err)
	}
	accepts(r, "on a replica caught up with the primary", []string{"a"}, []string{"b", "c", "d"})
}
