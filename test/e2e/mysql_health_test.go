package e2e

import (
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestMySQLHealthGate: a replica whose SQL thread is stopped holds the
// start of a rotation and of a discard (ClusterUnhealthy, a Warning Event
// and Degraded naming the instance), no user changes meanwhile, and the
// phase starts by itself once replication runs again. One cluster, one
// set, both phases in turn.
func TestMySQLHealthGate(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	if err := k8s.Create(ctxT(t), mocoSet(t, ns, "hg", c)); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "hg", v1.PhaseIdle, 1)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")
	p := loginProber(t, c.Instances(), ns, "hg-creds")
	r1, r2 := c.Replicas[0], c.Replicas[1]
	var pend map[string]string

	t.Run("rotation waits for a stopped SQL thread", func(t *testing.T) {
		mk := matrixMark(t, p, "replica SQL thread stopped, rotation requested, replication started again")
		if err := r1.Exec("STOP REPLICA SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		rotate(t, ns, "hg", "hg-1")
		note := waitEventNoting(t, ns, "hg", reason.ClusterUnhealthy, r1.Addr())
		mustContain(t, "ClusterUnhealthy event", note, "rotation does not start", "SQL thread is stopped", "checks again by itself")
		mustContain(t, "Degraded condition", waitDegraded(t, ns, "hg", reason.ClusterUnhealthy), r1.Addr())
		cs := getSet(t, ns, "hg")
		if cs.Status.Phase != v1.PhaseIdle {
			t.Fatalf("the rotation started on an unhealthy cluster: %s", stateOf(cs))
		}
		// No user changed: no secondary password anywhere, only the
		// current passwords log in, the replicas stay read-only.
		noDualPasswords(t, c.Instances())
		loginMatrix(t, "refused for an unhealthy cluster", c.Instances(), old, nil)
		assertSuperReadOnly(t, c.Replicas...)

		if err := r1.Exec("START REPLICA SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		mk.resume()
		cs = waitPhase(t, ns, "hg", v1.PhaseDistributed, 1)
		mk.reached()
		pend = userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
		loginMatrix(t, "Distributed once replication ran again", c.Instances(), old, nil)
		loginMatrix(t, "Distributed once replication ran again", c.Instances(), pend, nil)
		mk.done(t, "held (ClusterUnhealthy names the replica), nothing changed; started by itself once the SQL thread ran, Distributed")
	})

	t.Run("discard waits for a stopped SQL thread", func(t *testing.T) {
		mk := matrixMark(t, p, "replica SQL thread stopped while Distributed, discard requested, replication started again")
		if err := r2.Exec("STOP REPLICA SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		discard(t, ns, "hg", "hg-1")
		note := waitEventNoting(t, ns, "hg", reason.ClusterUnhealthy, "discard")
		mustContain(t, "ClusterUnhealthy event", note, r2.Addr(), "SQL thread is stopped")
		holdsFor(t, 2*time.Second, "the discard holds while the SQL thread is stopped", func() (bool, string) {
			cs := getSet(t, ns, "hg")
			return cs.Status.Phase == v1.PhaseDistributed && !cs.Status.DiscardApplied, stateOf(cs)
		})
		loginMatrix(t, "discard refused for an unhealthy cluster", c.Instances(), old, nil)
		loginMatrix(t, "discard refused for an unhealthy cluster", c.Instances(), pend, nil)

		if err := r2.Exec("START REPLICA SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		mk.resume()
		waitPhase(t, ns, "hg", v1.PhaseIdle, 2)
		mk.reached()
		loginMatrix(t, "after the discard", c.Instances(), pend, old)
		assertSuperReadOnly(t, c.Replicas...)
		mk.done(t, "held (ClusterUnhealthy names the replica), nothing discarded; completed by itself once the SQL thread ran")
	})
}

// noDualPasswords: no rotated user has a secondary password on any
// instance.
func noDualPasswords(t *testing.T, insts []*testenv.MySQLInstance) {
	t.Helper()
	for _, i := range insts {
		n, err := i.QueryString("SELECT COUNT(*) FROM mysql.user WHERE User LIKE 'moco-%' AND JSON_CONTAINS_PATH(COALESCE(User_attributes,'{}'),'one','$.additional_password')")
		if err != nil || n != "0" {
			t.Fatalf("%s: %s users with a secondary password (%v), want 0", i.Name, n, err)
		}
	}
}
