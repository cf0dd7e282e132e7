package e2e

import (
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestInstanceStoppedMidPhase stops a replica in the middle of phase 1 —
// the primary has the new passwords retained, the replica's ALTER USER is
// blocked behind a global read lock — and starts it again: the phase holds
// (InstanceUnreachable names it), nothing is lost, and it resumes by itself
// to complete, with the replica super_read_only again.
func TestInstanceStoppedMidPhase(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	set := mocoSet(t, ns, "mid", c)
	deployConsumers(t, set, mocoKeys, c.Instances)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "mid", v1.PhaseIdle, 1)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")
	replica, others := c.Replicas[0], []*testenv.MySQLInstance{c.Primary, c.Replicas[1]}
	mk := matrixMark(t, loginProber(t, c.Instances(), ns, "mid-creds"), "instance stopped mid-phase (primary applied, a replica's ALTER USER in flight) and started again")

	holdGlobalReadLock(t, replica)
	rotate(t, ns, "mid", "mid-1")
	eventually(t, time.Minute, "phase 1 applied on the primary while the replica is blocked", func() (bool, string) {
		dual, err := c.Primary.QueryString("SELECT JSON_CONTAINS_PATH(COALESCE(User_attributes,'{}'),'one','$.additional_password') FROM mysql.user WHERE User='moco-agent' AND Host='%'")
		cs := getSet(t, ns, "mid")
		return err == nil && dual == "1" && cs.Status.Phase == v1.PhaseRotating && !cs.Status.RotateApplied, stateOf(cs)
	})
	replica.Stop()
	mustContain(t, "InstanceUnreachable event", waitEvent(t, ns, "mid", string(reason.InstanceUnreachable)), replica.Addr())
	holdsFor(t, 3*time.Second, "the phase holds while the replica is down", func() (bool, string) {
		cs := getSet(t, ns, "mid")
		return cs.Status.Phase == v1.PhaseRotating && !cs.Status.RotateApplied, stateOf(cs)
	})
	observed(t, "Rotating, not applied, for 3 s while %s was down", replica.Name)
	loginMatrix(t, "replica down mid-phase", others, old, nil)
	pend := userPasswords(sourceData(t, getSet(t, ns, "mid")), mocoKeys, engine.PendingSuffix)

	if err := replica.Start(); err != nil {
		t.Fatal(err)
	}
	mk.resume()
	cs = waitPhase(t, ns, "mid", v1.PhaseDistributed, 1)
	mk.reached()
	loginMatrix(t, "resumed after the replica came back", c.Instances(), old, nil)
	loginMatrix(t, "resumed after the replica came back", c.Instances(), pend, nil)
	assertSuperReadOnly(t, c.Replicas...)
	discard(t, ns, "mid", "mid-1")
	waitPhase(t, ns, "mid", v1.PhaseIdle, 2)
	loginMatrix(t, "after discard", c.Instances(), pend, old)
	assertSuperReadOnly(t, c.Replicas...)
	mk.done(t, "phase held (InstanceUnreachable) while the replica was down, resumed by itself, completed")
}
