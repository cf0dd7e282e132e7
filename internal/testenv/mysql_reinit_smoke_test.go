package testenv

import (
	"strings"
	"testing"
	"time"
)

// TestMySQLReinitSmoke proves the two ways the harness rebuilds a replica
// mid-test, and what each leaves of accounts created with sql_log_bin=0
// (as rekey creates them): an empty data directory replaying the primary's
// binary logs has none of them; a CLONE has the donor's rows, secondary
// password included.
func TestMySQLReinitSmoke(t *testing.T) {
	c := MySQLClusterForTest(t, MySQLOptions{})
	p := c.Primary
	for _, i := range c.Instances() {
		stmts := []string{"SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
			"CREATE USER 'smoke-unlogged'@'%' IDENTIFIED BY 'cur-pw'",
			"ALTER USER 'smoke-unlogged'@'%' IDENTIFIED BY 'pend-pw' RETAIN CURRENT PASSWORD"}
		if i != p {
			stmts = append(stmts, "SET GLOBAL super_read_only=ON")
		}
		if err := i.Exec(stmts...); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Exec("CREATE DATABASE smoke_logged", "CREATE TABLE smoke_logged.t (id INT PRIMARY KEY)", "INSERT INTO smoke_logged.t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	primaryUUID, _ := p.QueryString("SELECT @@GLOBAL.server_uuid")

	// replicated checks what every rebuilt replica must be: caught up,
	// replicating, super_read_only, its own server_uuid, its binary log
	// free of account statements.
	replicated := func(t *testing.T, r *MySQLInstance) {
		t.Helper()
		want, _ := p.QueryString("SELECT COUNT(*) FROM smoke_logged.t")
		if v, _ := r.QueryString("SELECT COUNT(*) FROM smoke_logged.t"); v != want || v == "0" {
			t.Fatalf("%s: the primary's logged history was not replayed (rows %q, primary %q)", r.Name, v, want)
		}
		if v, _ := r.QueryString("SELECT @@GLOBAL.super_read_only"); v != "1" {
			t.Fatalf("%s: super_read_only = %q after re-initialisation", r.Name, v)
		}
		if uuid, _ := r.QueryString("SELECT @@GLOBAL.server_uuid"); uuid == primaryUUID || uuid == "" {
			t.Fatalf("%s: server_uuid %q (primary %q)", r.Name, uuid, primaryUUID)
		}
		if err := p.Exec("INSERT INTO smoke_logged.t VALUES (" + time.Now().Format("150405") + ")"); err != nil {
			t.Fatal(err)
		}
		if err := r.WaitCaughtUp(p); err != nil {
			t.Fatal(err)
		}
		if mine, theirs := gtidSet(t, r), gtidSet(t, p); mine != theirs {
			t.Fatalf("%s gtid_executed %q, primary %q", r.Name, mine, theirs)
		}
		if ddl, err := r.CredentialDDLInBinlog(); err != nil || len(ddl) > 0 {
			t.Fatalf("%s: account statements in the binary log: %v (%v)", r.Name, ddl, err)
		}
	}

	t.Run("empty data directory: the unlogged account is gone, the env account is back", func(t *testing.T) {
		r := c.Replicas[0]
		start := time.Now()
		if err := r.Reinit(p, ReinitOptions{Bootstrap: []string{"CREATE USER 'smoke-boot'@'%' IDENTIFIED BY 'boot-pw'"}}); err != nil {
			t.Fatal(err)
		}
		t.Logf("re-initialised %s in %s", r.Name, time.Since(start).Round(time.Millisecond))
		if n, _ := r.QueryString("SELECT COUNT(*) FROM mysql.user WHERE User='smoke-unlogged'"); n != "0" {
			t.Fatalf("%s still has the unlogged account", r.Name)
		}
		if err := r.CanLogin("smoke-boot", "boot-pw"); err != nil {
			t.Fatalf("bootstrap account: %v", err)
		}
		replicated(t, r)
	})

	t.Run("clone: the donor's rows come along, secondary password included", func(t *testing.T) {
		r := c.Replicas[1]
		start := time.Now()
		if err := r.Reinit(p, ReinitOptions{Clone: true}); err != nil {
			t.Fatal(err)
		}
		t.Logf("cloned %s in %s", r.Name, time.Since(start).Round(time.Millisecond))
		if !hasDual(t, r, "smoke-unlogged") {
			t.Fatalf("%s: the donor's secondary password did not come with the clone", r.Name)
		}
		for _, pw := range []string{"cur-pw", "pend-pw"} {
			if err := r.CanLogin("smoke-unlogged", pw); err != nil {
				t.Fatalf("%s after clone, %s: %v", r.Name, pw, err)
			}
		}
		replicated(t, r)
	})

	t.Run("the primary's binary log holds no account statement", func(t *testing.T) {
		if ddl, err := p.CredentialDDLInBinlog(); err != nil || len(ddl) > 0 {
			t.Fatalf("primary: %v (%v)", ddl, err)
		}
		if err := p.Exec("CREATE USER 'smoke-logged'@'%' IDENTIFIED BY 'x'"); err != nil {
			t.Fatal(err)
		}
		ddl, err := p.CredentialDDLInBinlog()
		if err != nil || len(ddl) != 1 || !strings.Contains(ddl[0], "CREATE USER") {
			t.Fatalf("a logged CREATE USER is not found by the scan: %v (%v)", ddl, err)
		}
	})
}

func gtidSet(t *testing.T, i *MySQLInstance) string {
	t.Helper()
	v, err := i.QueryString("SELECT @@GLOBAL.gtid_executed")
	if err != nil {
		t.Fatal(err)
	}
	return v
}
