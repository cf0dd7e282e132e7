package e2e

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// TestSwitchoverMidRotation: the primary moves to a replica between the
// two phases (a planned switchover). Roles are read live, so discard
// lifts super_read_only on the old primary — now a replica — and leaves
// the new primary writable.
func TestSwitchoverMidRotation(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	set := mocoSet(t, ns, "sw", c)
	deployConsumers(t, set, mocoKeys, c.Instances)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "sw", v1.PhaseIdle, 1)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")
	rotate(t, ns, "sw", "sw-1")
	cs = waitPhase(t, ns, "sw", v1.PhaseDistributed, 1)
	pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	mk := matrixMark(t, loginProber(t, c.Instances(), ns, "sw-creds"), "switchover while Distributed (primary moved to a replica), then discard")

	// Switchover: the old primary turns read-only, replica1 is promoted,
	// and the others replicate from it.
	oldPrimary, newPrimary, other := c.Primary, c.Replicas[0], c.Replicas[1]
	if err := testenv.Switchover(oldPrimary, newPrimary, other); err != nil {
		t.Fatal(err)
	}

	mk.resume()
	discard(t, ns, "sw", "sw-1")
	waitPhase(t, ns, "sw", v1.PhaseIdle, 2)
	mk.reached()
	loginMatrix(t, "after a switchover mid-rotation", c.Instances(), pend, old)
	assertSuperReadOnly(t, oldPrimary, other)
	for _, q := range []string{"SELECT @@GLOBAL.read_only", "SELECT @@GLOBAL.super_read_only"} {
		if v, err := newPrimary.QueryString(q); err != nil || v != "0" {
			t.Fatalf("new primary: %s = %q (%v), want 0: rekey made it read-only", q, v, err)
		}
	}
	// Replication still flows from the new primary.
	if err := newPrimary.Exec("CREATE DATABASE after_switchover"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*testenv.MySQLInstance{oldPrimary, other} {
		if err := r.WaitCaughtUp(newPrimary); err != nil {
			t.Fatal(err)
		}
	}
	mk.done(t, "completed: roles read live, new primary left writable, the others super_read_only, replication flows")
}
