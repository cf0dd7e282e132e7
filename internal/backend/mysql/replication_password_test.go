package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// checkReplicationPassword: a rotated replication password must work
// where MOCO uses it, in CHANGE REPLICATION SOURCE TO on a replica, after
// which replication runs. A 40-character one (rekey's former length) is
// refused there with 3056, which is why the length is bounded. And a
// rotation that would give a user the instance lets replicate a password
// that long does not start. It runs on the cluster of
// TestHostilePasswordsRoundTripOnRealMySQL (a started cluster costs more
// than these checks), after that test, as its subtest.
func checkReplicationPassword(t *testing.T, c *testenv.MySQLCluster) {
	ctx := context.Background()
	spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: testenv.EnvUser}, Preset: "moco", Users: []v1.MySQLUser{
		{Name: "feed", Grants: []v1.MySQLGrant{{Object: "*.*", Privileges: []string{"REPLICATION SLAVE"}}}},
	}}
	b, err := New(spec, clusterInstances(c), testenv.EnvPassword, caPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	cur, err := b.NewSecrets(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Provision(ctx, cur); err != nil {
		t.Fatal(err)
	}
	pending, err := b.NewSecrets(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Precheck(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.Retire(ctx, cur, pending); err != nil {
		t.Fatal(err)
	}
	replica := c.Replicas[0]
	for _, u := range []struct{ user, key string }{{"moco-repl", "REPLICATION_PASSWORD"}, {"feed", "FEED_PASSWORD"}} {
		pw := pending[u.key]
		if len(pw) != MaxReplicationPasswordLength {
			t.Fatalf("%s's rotated password has %d characters, want %d", u.user, len(pw), MaxReplicationPasswordLength)
		}
		if err := replica.Exec("STOP REPLICA", changeSource(c.Primary, u.user, pw), "START REPLICA"); err != nil {
			t.Fatalf("%s's rotated password in CHANGE REPLICATION SOURCE: %v", u.user, err)
		}
		table := strings.ReplaceAll(u.user, "-", "_")
		if err := c.Primary.Exec("CREATE DATABASE IF NOT EXISTS repl_check", "CREATE TABLE repl_check."+table+" (id INT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		waitReplicating(t, replica, u.user)
		if err := replica.WaitCaughtUp(c.Primary); err != nil {
			t.Fatal(err)
		}
		if n, err := replica.QueryString("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='repl_check' AND table_name=?", table); err != nil || n != "1" {
			t.Fatalf("the table written on the primary after re-pointing as %s is not on the replica (%s, %v)", u.user, n, err)
		}
	}

	// The bound is MySQL's, not ours.
	forty, err := engine.NewPasswordOfLength(40)
	if err != nil {
		t.Fatal(err)
	}
	err = replica.Exec("STOP REPLICA", changeSource(c.Primary, "moco-repl", forty))
	if mysqlErrno(err) != 3056 {
		t.Fatalf("a 40-character SOURCE_PASSWORD: %v, want MySQL error 3056", err)
	}
	if err := replica.Exec("START REPLICA"); err != nil {
		t.Fatal(err)
	}

	// Users listed without grants, with long passwords: admission cannot
	// see that a replica may use them, the precheck does. relay is granted
	// REPLICATION SLAVE by hand; feed is, besides, the user the replica
	// now logs in to its source as.
	if err := c.Primary.Exec("CREATE USER 'relay'@'%' IDENTIFIED BY 'relay-adopted-pw'", "GRANT REPLICATION SLAVE ON *.* TO 'relay'@'%'"); err != nil {
		t.Fatal(err)
	}
	if err := replica.WaitCaughtUp(c.Primary); err != nil {
		t.Fatal(err)
	}
	long := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: testenv.EnvUser}, Users: []v1.MySQLUser{{Name: "relay", PasswordLength: 48}, {Name: "feed", PasswordLength: 48}}}
	lb, err := New(long, clusterInstances(c), testenv.EnvPassword, caPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	err = lb.Precheck(ctx, engine.Secrets{"RELAY_PASSWORD": "relay-adopted-pw", "FEED_PASSWORD": pending["FEED_PASSWORD"]})
	var rf *engine.Refusal
	if !errors.As(err, &rf) {
		t.Fatalf("precheck of 48-character passwords for replication users: %v, want a refusal", err)
	}
	for _, want := range []string{
		"feed@% (passwordLength 48): " + replica.Name + " replicates as it; granted REPLICATION SLAVE on primary, replica1, replica2",
		"relay@% (passwordLength 48): granted REPLICATION SLAVE on primary, replica1, replica2",
		"Set passwordLength to 32",
	} {
		if !strings.Contains(rf.Message, want) {
			t.Fatalf("refusal %q lacks %q", rf.Message, want)
		}
	}
}

func changeSource(source *testenv.MySQLInstance, user, password string) string {
	return fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT=%d, SOURCE_USER=%s, SOURCE_PASSWORD=%s, SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1",
		source.Port, quote(user), quote(password))
}

// waitReplicating waits until the replica's receiver is connected and its
// applier runs, or reports the receiver's error (a refused login).
func waitReplicating(t *testing.T, r *testenv.MySQLInstance, user string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		st, err := r.ReplicaStatus()
		switch {
		case err != nil:
			t.Fatal(err)
		case st["Replica_IO_Running"] == "Yes" && st["Replica_SQL_Running"] == "Yes":
			return
		case st["Last_IO_Errno"] != "" && st["Last_IO_Errno"] != "0":
			t.Fatalf("replication as %s: IO error %s: %s", user, st["Last_IO_Errno"], st["Last_IO_Error"])
		}
		select {
		case <-ctx.Done():
			t.Fatalf("replication as %s did not start: %v", user, st)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
