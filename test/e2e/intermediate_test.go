package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// TestIntermediatePrimaryRotation (issue 20 item 3): the set's cluster B
// has an intermediate primary: B's primary replicates from the
// primary of another cluster A and is itself the source of B's replicas;
// it is read-only (super_read_only=ON) like them, and nothing in B is
// writable. rekey rotates B's users: it must lift super_read_only on B's
// primary for its DDL and put it back, write nothing to any binary log
// (B's primary logs what it replicates, so anything rekey logged there
// would reach B's replicas, and errant GTIDs would break a switchover to
// A), and leave A — whose users rekey does not manage — untouched.
//
// Meanwhile an application keeps writing on A, and its rows travel A →
// B's primary → B's replicas throughout. Consumers are pods that read the
// Secret at start and log in round-robin over B's three instances; the
// prober logs in with what the Secret holds at each moment. Not one login
// may be refused from the start of the rotation to Idle.
func TestIntermediatePrimaryRotation(t *testing.T) {
	// Cluster A starts beside cluster B and the control plane.
	type started struct {
		c   *testenv.MySQLCluster
		err error
	}
	ach := make(chan started, 1)
	go func() {
		c, err := env.StartMySQLCluster(testenv.MySQLOptions{NoReplicas: true})
		ach <- started{c, err}
	}()
	waitA := func() started { s := <-ach; ach <- s; return s }
	t.Cleanup(func() {
		if s := waitA(); s.c != nil {
			s.c.Stop()
		}
	})
	b := matrixCluster(t, testenv.MySQLOptions{})
	sa := waitA()
	if sa.err != nil {
		t.Fatalf("cluster A: %v", sa.err)
	}
	a := sa.c.Primary
	a.Name, b.Primary.Name = "a-primary", "b-primary"
	for n, r := range b.Replicas {
		r.Name = fmt.Sprintf("b-replica%d", n+1)
	}
	nameInstances(a, b.Primary, b.Replicas[0], b.Replicas[1])
	ns := newNamespace(t)
	startManager(t, cp.Config)
	// moco-admin is prepared on B's instances while B's primary is still
	// writable (as MOCO's init does before the cluster is cloned).
	set := mocoSet(t, ns, "mid", b)

	// B's primary becomes an intermediate primary: a read-only replica of
	// A, with B's replicas still replicating from it.
	if err := b.Primary.ReplicateFrom(a); err != nil {
		t.Fatal(err)
	}
	if err := b.Primary.Exec("SET GLOBAL super_read_only=ON"); err != nil {
		t.Fatal(err)
	}
	aUsers := userTable(t, a)
	stopWriter := writeOn(t, a)
	waitRowsArrive(t, a, b.Instances()...)
	assertSuperReadOnly(t, b.Instances()...)
	assertReplicating(t, b.Primary, a)

	deployConsumers(t, set, mocoKeys, b.Instances)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "mid", v1.PhaseIdle, 1)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")
	assertSuperReadOnly(t, b.Instances()...)
	p := startProber(t, b.Instances(), ns, "mid-creds", mocoKeys)

	mk := matrixMark(t, p, "rotation of a cluster whose primary is an intermediate primary (a read-only replica of another cluster)")
	rotate(t, ns, "mid", "mid-1")
	cs = waitPhase(t, ns, "mid", v1.PhaseDistributed, 1)
	pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	loginMatrix(t, "Distributed: new passwords on B", b.Instances(), pend, nil)
	loginMatrix(t, "Distributed: old passwords on B", b.Instances(), old, nil)
	// Phase 1 lifted super_read_only on every instance of B for its DDL,
	// the intermediate primary included, and put it back.
	assertSuperReadOnly(t, b.Instances()...)
	assertReplicating(t, b.Primary, a)
	time.Sleep(2 * time.Second) // both generations of consumers at work

	discard(t, ns, "mid", "mid-1")
	cs = waitPhase(t, ns, "mid", v1.PhaseIdle, 2)
	mk.reached()
	now := userPasswords(sourceData(t, cs), mocoKeys, "")
	loginMatrix(t, "Idle at generation 2 on B", b.Instances(), now, old)
	assertNoDualPassword(t, b)
	assertSameAccounts(t, b)
	assertSuperReadOnly(t, b.Instances()...)
	assertReplicating(t, b.Primary, a)

	// A's rows kept reaching B's replicas through the intermediate
	// primary; then nothing else is written.
	stopWriter()
	waitRowsArrive(t, a, b.Instances()...)
	for _, i := range append([]*testenv.MySQLInstance{a}, b.Instances()...) {
		if ddl, err := i.CredentialDDLInBinlog(); err != nil || len(ddl) > 0 {
			t.Fatalf("%s: credential DDL in the binary log: %v (%v)", i.Name, ddl, err)
		}
	}
	observed(t, "no credential DDL in the binary logs of A and B")
	aGTID := gtidExecuted(t, a)
	for _, i := range b.Instances() {
		if got := gtidExecuted(t, i); got != aGTID {
			t.Fatalf("%s gtid_executed %q differs from A's %q: a transaction originated in B", i.Name, got, aGTID)
		}
	}
	observed(t, "every instance of B has exactly A's gtid_executed: nothing originated in B")
	if userTable(t, a) != aUsers {
		t.Fatal("A's mysql.user changed")
	}
	if n, err := a.QueryString("SELECT COUNT(*) FROM mysql.user WHERE User LIKE 'moco-%'"); err != nil || n != "0" {
		t.Fatalf("A has %s of B's users (%v)", n, err)
	}
	observed(t, "A's mysql.user unchanged, none of B's users there")
	mk.done(t, "rotated and discarded on every instance of B; super_read_only back on B's intermediate primary, which still replicates from A; nothing binlogged in A or B; A untouched")
	p.assertNoGap(t)
	assertNoSecretLeaked(t, ns, "mid", old, pend)
}

// assertReplicating: i replicates from source with both threads running.
func assertReplicating(t testing.TB, i, source *testenv.MySQLInstance) {
	t.Helper()
	st, err := i.ReplicaStatus()
	if err != nil {
		t.Fatal(err)
	}
	if st["Source_Port"] != fmt.Sprint(source.Port) || st["Replica_IO_Running"] != "Yes" || st["Replica_SQL_Running"] != "Yes" {
		t.Fatalf("%s: replication from %s: source port %s, IO %s, SQL %s (%s %s)", i.Name, source.Name,
			st["Source_Port"], st["Replica_IO_Running"], st["Replica_SQL_Running"], st["Last_IO_Error"], st["Last_SQL_Error"])
	}
	observed(t, "%s replicates from %s, both threads running", i.Name, source.Name)
}

// writeOn is an application writing a row on i every 100 ms until the
// function it returns is called (or the test ends).
func writeOn(t testing.TB, i *testenv.MySQLInstance) func() {
	t.Helper()
	if err := i.Exec("CREATE DATABASE IF NOT EXISTS app", "CREATE TABLE IF NOT EXISTS app.writes (id INT AUTO_INCREMENT PRIMARY KEY, at DATETIME(3))",
		"INSERT INTO app.writes (at) VALUES (NOW(3))"); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if err := i.Exec("INSERT INTO app.writes (at) VALUES (NOW(3))"); err != nil {
				t.Errorf("write on %s: %v", i.Name, err)
				return
			}
		}
	}()
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); <-done }) }
	t.Cleanup(halt)
	return halt
}

// waitRowsArrive waits until every instance of to holds the rows source
// holds now (one writer, no deletes: its highest id).
func waitRowsArrive(t testing.TB, source *testenv.MySQLInstance, to ...*testenv.MySQLInstance) {
	t.Helper()
	const q = "SELECT COALESCE(MAX(id), 0) FROM app.writes"
	want, err := source.QueryString(q)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range to {
		waitFor(t, time.Minute, fmt.Sprintf("%s holds %s's rows up to id %s", i.Name, source.Name, want), func() (bool, string) {
			n, err := i.QueryString("SELECT COUNT(*) FROM app.writes WHERE id = ?", want)
			return err == nil && n == "1", fmt.Sprintf("%s (%v)", n, err)
		})
	}
	observed(t, "%s's rows reached %d instances", source.Name, len(to))
}
