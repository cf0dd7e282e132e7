package testenv

import (
	"strings"
	"testing"
)

// These smoke tests prove, on the real mysqld, the behaviours the MySQL
// backend is built on. If one fails after a version bump, the backend's
// assumptions no longer hold.

func hasDual(t *testing.T, i *MySQLInstance, user string) bool {
	t.Helper()
	v, err := i.QueryString("SELECT JSON_CONTAINS_PATH(COALESCE(User_attributes, '{}'), 'one', '$.additional_password') FROM mysql.user WHERE User=? AND Host='%'", user)
	if err != nil {
		t.Fatal(err)
	}
	return v == "1"
}

func TestMySQLSmoke(t *testing.T) {
	c := MySQLClusterForTest(t, MySQLOptions{Downstream: true})
	p := c.Primary
	if v, err := p.QueryString("SELECT VERSION()"); err != nil || !strings.HasPrefix(v, "9.7.") {
		t.Fatalf("primary VERSION() = %q, %v; want 9.7.x", v, err)
	} else {
		t.Logf("server version: mysqld %s", v)
	}

	t.Run("every instance serves TLS with the test CA's certificate", func(t *testing.T) {
		// The harness's own connections verify it (127.0.0.1): a session
		// that is up is a verified one; Ssl_cipher says it is TLS.
		for _, i := range append(c.Instances(), c.Downstream) {
			db, err := i.DB()
			if err != nil {
				t.Fatal(err)
			}
			var name, cipher string
			err = db.QueryRow("SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher)
			db.Close()
			if err != nil || cipher == "" {
				t.Fatalf("%s: Ssl_cipher %q, %v: want a TLS session verified with the test CA", i.Name, cipher, err)
			}
			if v, _ := i.QueryString("SELECT @@GLOBAL.ssl_ca"); !strings.HasSuffix(v, "/ca.pem") {
				t.Fatalf("%s: ssl_ca = %q, want the harness's ca.pem", i.Name, v)
			}
		}
	})

	t.Run("replicas are super_read_only and refuse writes until it is lifted", func(t *testing.T) {
		for _, r := range append(c.Replicas, c.Downstream) {
			if v, _ := r.QueryString("SELECT @@GLOBAL.super_read_only"); v != "1" {
				t.Fatalf("%s super_read_only = %q, want 1", r.Name, v)
			}
			err := r.Exec("SET SESSION sql_log_bin=0", "CREATE USER 'smoke-ro'@'%' IDENTIFIED BY 'x'")
			if err == nil || !strings.Contains(err.Error(), "super-read-only") {
				t.Fatalf("%s accepted a write under super_read_only: %v", r.Name, err)
			}
			if err := r.Exec("SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
				"CREATE USER 'smoke-ro'@'%' IDENTIFIED BY 'x'", "DROP USER 'smoke-ro'@'%'",
				"SET GLOBAL super_read_only=ON"); err != nil {
				t.Fatalf("%s: write with super_read_only lifted: %v", r.Name, err)
			}
		}
		if v, _ := p.QueryString("SELECT @@GLOBAL.super_read_only"); v != "0" {
			t.Fatalf("primary super_read_only = %q, want 0", v)
		}
	})

	t.Run("sql_log_bin=0 reaches neither replicas nor downstream; a logged statement does", func(t *testing.T) {
		before, _ := c.Downstream.QueryString("SELECT @@GLOBAL.gtid_executed")
		if err := p.Exec("SET SESSION sql_log_bin=0", "CREATE USER 'smoke-nolog'@'%' IDENTIFIED BY 'a'"); err != nil {
			t.Fatal(err)
		}
		if err := p.Exec("CREATE USER 'smoke-logged'@'%' IDENTIFIED BY 'b'"); err != nil {
			t.Fatal(err)
		}
		for _, r := range append(c.Replicas, c.Downstream) {
			if err := r.WaitCaughtUp(p); err != nil {
				t.Fatal(err)
			}
			n, _ := r.QueryString("SELECT COUNT(*) FROM mysql.user WHERE User='smoke-nolog'")
			if n != "0" {
				t.Errorf("%s received the unlogged CREATE USER", r.Name)
			}
			n, _ = r.QueryString("SELECT COUNT(*) FROM mysql.user WHERE User='smoke-logged'")
			if n != "1" {
				t.Errorf("%s did not receive the logged CREATE USER", r.Name)
			}
		}
		after, _ := c.Downstream.QueryString("SELECT @@GLOBAL.gtid_executed")
		if before == after {
			t.Errorf("downstream gtid_executed did not move after a logged statement (%q)", after)
		}
	})

	t.Run("RETAIN CURRENT PASSWORD: both log in and the secondary is visible", func(t *testing.T) {
		if err := p.Exec("SET SESSION sql_log_bin=0", "CREATE USER 'smoke-dual'@'%' IDENTIFIED BY 'old-pw'"); err != nil {
			t.Fatal(err)
		}
		if hasDual(t, p, "smoke-dual") {
			t.Fatal("fresh user reports a dual password")
		}
		if err := p.Exec("SET SESSION sql_log_bin=0", "ALTER USER 'smoke-dual'@'%' IDENTIFIED BY 'new-pw' RETAIN CURRENT PASSWORD"); err != nil {
			t.Fatal(err)
		}
		for _, pw := range []string{"old-pw", "new-pw"} {
			if err := p.CanLogin("smoke-dual", pw); err != nil {
				t.Errorf("login with %s after RETAIN: %v", pw, err)
			}
		}
		if !hasDual(t, p, "smoke-dual") {
			t.Fatal("additional_password not visible after RETAIN")
		}
		// A second RETAIN evicts the original password (so rekey never issues it twice).
		if err := p.Exec("SET SESSION sql_log_bin=0", "ALTER USER 'smoke-dual'@'%' IDENTIFIED BY 'newer-pw' RETAIN CURRENT PASSWORD"); err != nil {
			t.Fatal(err)
		}
		if err := p.CanLogin("smoke-dual", "old-pw"); err == nil {
			t.Error("the original password still logs in after a second RETAIN")
		}
	})

	t.Run("IDENTIFIED BY keeps the secondary, DISCARD clears it", func(t *testing.T) {
		if err := p.Exec("SET SESSION sql_log_bin=0",
			"CREATE USER 'smoke-reset'@'%' IDENTIFIED BY 'cur'",
			"ALTER USER 'smoke-reset'@'%' IDENTIFIED BY 'pend' RETAIN CURRENT PASSWORD",
			"ALTER USER 'smoke-reset'@'%' IDENTIFIED BY 'cur'"); err != nil {
			t.Fatal(err)
		}
		if !hasDual(t, p, "smoke-reset") {
			t.Fatal("IDENTIFIED BY cleared the secondary on this server: the reset's DISCARD OLD PASSWORD step needs revisiting")
		}
		if err := p.Exec("SET SESSION sql_log_bin=0", "ALTER USER 'smoke-reset'@'%' DISCARD OLD PASSWORD"); err != nil {
			t.Fatal(err)
		}
		if hasDual(t, p, "smoke-reset") {
			t.Fatal("DISCARD OLD PASSWORD left a secondary password")
		}
		if err := p.CanLogin("smoke-reset", "cur"); err != nil {
			t.Fatalf("current password after reset: %v", err)
		}
		if err := p.CanLogin("smoke-reset", "pend"); err == nil {
			t.Fatal("pending password still logs in after reset")
		}
		// DISCARD with no secondary is a no-op.
		if err := p.Exec("SET SESSION sql_log_bin=0", "ALTER USER 'smoke-reset'@'%' DISCARD OLD PASSWORD"); err != nil {
			t.Fatal(err)
		}
	})
}
