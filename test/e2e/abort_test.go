package e2e

import (
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// waitReset waits for a rollback or recovery to finish: Idle, nothing
// left to reset.
func waitReset(t *testing.T, ns, name string, gen int64) *v1.CredentialSet {
	t.Helper()
	var cs *v1.CredentialSet
	waitFor(t, 2*time.Minute, "reset finished", func() (bool, string) {
		cs = getSet(t, ns, name)
		return cs.Status.Phase == v1.PhaseIdle && !cs.Status.ResetPending && cs.Status.KeyGeneration == gen, stateOf(cs)
	})
	observed(t, "%s rolled back: Idle at generation %d, nothing left to reset", name, gen)
	return cs
}

func assertNoDualPassword(t *testing.T, c *testenv.MySQLCluster) {
	t.Helper()
	for _, i := range c.Instances() {
		n, err := i.QueryString("SELECT COUNT(*) FROM mysql.user WHERE JSON_CONTAINS_PATH(COALESCE(User_attributes,'{}'),'one','$.additional_password')")
		if err != nil || n != "0" {
			t.Fatalf("%s: %s users keep a secondary password (%v)", i.Name, n, err)
		}
	}
	observed(t, "no secondary password on any instance")
}

// TestAbortAndRecover: a rotation is rolled back from Distributed in the
// order that locks no one out, under a continuous prober, leaving MySQL with only the
// current passwords (IDENTIFIED BY, then DISCARD OLD PASSWORD);
// a dual password nobody accounts for is recovered through the operator,
// and the refused rotation then starts cleanly.
func TestAbortAndRecover(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	set := mocoSet(t, ns, "ab", c)
	deployConsumers(t, set, mocoKeys, c.Instances)
	writes := watchSetWrites(t, ns)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "ab", v1.PhaseIdle, 1)
	cur := userPasswords(sourceData(t, cs), mocoKeys, "")
	p := startProber(t, c.Instances(), ns, "ab-creds", mocoKeys)

	t.Run("abort from Distributed", func(t *testing.T) {
		rotate(t, ns, "ab", "ab-1")
		cs := waitPhase(t, ns, "ab", v1.PhaseDistributed, 1)
		pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
		time.Sleep(500 * time.Millisecond)
		mk := matrixMark(t, p, "abort from Distributed (kubectl rekey abort)")
		waits := watchWaits(t, ns, "ab")
		annotate(t, ns, "ab", engine.AbortAnnotation, "ab-1")
		cs = waitReset(t, ns, "ab", 1)
		mk.reached()
		mustContain(t, "RotationAborted event", waitEvent(t, ns, "ab", string(reason.RotationAborted)), "ab-1")
		// Honest waits: the reset's wait and its deadline are in status,
		// and the rollout Event names the rotation rolled back.
		waits.assertResetWait(t, managerGracePeriod)
		waitEventNoting(t, ns, "ab", reason.WaitingForRollout, "rollback of rotation ab-1: waiting for ")
		waitEvent(t, ns, "ab", string(reason.ResetApplied))
		loginMatrix(t, "after abort", c.Instances(), cur, pend)
		assertNoDualPassword(t, c)
		src := sourceData(t, cs)
		if len(userPasswords(src, mocoKeys, engine.PendingSuffix)) != 0 || src[engine.RotationIDKey] != nil {
			t.Fatal("source Secret kept the aborted rotation's pending data")
		}
		if !equalMaps(userPasswords(src, mocoKeys, ""), cur) {
			t.Fatal("abort changed the current passwords")
		}
		assertDistributed(t, ns, "ab-creds", cur)
		assertSuperReadOnly(t, c.Replicas...)
		mk.done(t, "rolled back: only the current passwords log in, no dual password left, pending data dropped")
		assertRotationResults(t, ns, "ab", 0, 1, 0)
	})

	t.Run("recover a dual password, then the refused rotation runs", func(t *testing.T) {
		onEachInstance(t, c.Replicas[1:], "ALTER USER 'moco-exporter'@'%' IDENTIFIED BY 'leaked-by-hand' RETAIN CURRENT PASSWORD")
		mk := matrixMark(t, p, "dual password created by hand before rotation, then kubectl rekey recover")
		rotate(t, ns, "ab", "ab-2")
		waitEvent(t, ns, "ab", string(reason.DualPasswordExists))
		mk.resume()
		annotate(t, ns, "ab", engine.RecoverAnnotation, "rec-1")
		waitEvent(t, ns, "ab", string(reason.RecoveryStarted))
		// The refused request was kept; after the reset it starts by itself.
		cs := waitPhase(t, ns, "ab", v1.PhaseDistributed, 1)
		mk.reached()
		if cs.Status.RotationID != "ab-2" || cs.Status.LastRecoverID != "rec-1" {
			t.Fatalf("after recovery: %s", stateOf(cs))
		}
		if c.Replicas[1].CanLogin("moco-exporter", "leaked-by-hand") == nil {
			t.Fatal("the password set by hand still logs in after recovery")
		}
		discard(t, ns, "ab", "ab-2")
		cs = waitPhase(t, ns, "ab", v1.PhaseIdle, 2)
		loginMatrix(t, "after the recovered rotation", c.Instances(), userPasswords(sourceData(t, cs), mocoKeys, ""), cur)
		assertNoDualPassword(t, c)
		mk.done(t, "refused (DualPasswordExists); recover reset it and the kept request ran to Distributed, then completed")
		// Recovering an idle set ends no rotation.
		assertRotationResults(t, ns, "ab", 1, 1, 0)
	})
	p.assertNoGap(t)
	// status.step named each of those states as it was written.
	writes.assertSteps(t, "ab",
		steps(engine.StepProvisioning, engine.StepIdle), steps(engine.StepApplying), steps(engine.StepDistributing),
		steps(engine.StepAwaitingRollout, engine.StepAwaitingDiscard), steps(engine.StepRollingBack, engine.StepResetting),
		steps(engine.StepIdle), steps(engine.StepRollingBack, engine.StepResetting), steps(engine.StepIdle),
		steps(engine.StepApplying), steps(engine.StepDistributing), steps(engine.StepAwaitingRollout, engine.StepAwaitingDiscard),
		steps(engine.StepDiscarding), steps(engine.StepConfirming), steps(engine.StepIdle))
}
