package testenv

import "testing"

// Require loads the environment or fails the test with the command that
// prepares it. A missing environment is a failure, never a skip: a test that
// did not run must not count as passing.
func Require(t testing.TB) *Env {
	t.Helper()
	e, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// MySQLClusterForTest starts a cluster for the test and stops it when the test ends.
func MySQLClusterForTest(t testing.TB, opts MySQLOptions) *MySQLCluster {
	t.Helper()
	e := Require(t)
	v, err := e.MySQLVersion()
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.StartMySQLCluster(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Logf("mysqld %s: primary %s, replicas %v", v, c.Primary.Addr(), c.Addrs()[1:])
	return c
}
