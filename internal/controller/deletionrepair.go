package controller

import (
	"context"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// repairBeforeRelease brings every instance to accept the current secrets
// before a Discard wind-down lets go, as an Idle set's reconcile does
// (engine.IdleRepairer). Discard leaves the current credentials valid for
// the consumers that hold them, and nothing reconciles the set afterwards:
// an instance that returned to the cluster since its last reconcile
// (rebuilt empty, or with an old volume) would refuse them for good.
// (Delete removes what rekey created once every declared consumer is gone.) A second password nobody
// accounts for is not its business here: the precheck before the wind-down
// holds the set for it (unaccountedSecond), and in a namespace being
// deleted the consumers go with it. Nor is a key changed outside rekey
// (KeyMismatch): the consumers that hold the served one are refused by
// that change, whatever the wind-down does.
func repairBeforeRelease(ctx context.Context, b engine.Backend, cur engine.Secrets) error {
	rp, ok := b.(engine.IdleRepairer)
	if !ok {
		return nil
	}
	err := rp.RepairIdle(ctx, cur)
	if rf, ok := engine.AsRefusal(err); ok && (rf.Reason == string(reason.DualPasswordExists) || rf.Reason == string(reason.KeyMismatch)) {
		return nil // reported, never repaired: nothing to wait for
	}
	return err
}

// repairWhileInUse keeps a deleted set serving its consumers while it
// waits: for them to go (deletionPolicy Delete), or held by a second
// secret or a switchover under way (holdForSecond). They still log in with
// the current secrets, so an instance that returned to the cluster since
// (a replica rebuilt empty, or back with an old volume) is repaired as an
// Idle set's reconcile would. Its failure (an instance that does not
// answer) is logged, and the wait goes on: the next pass tries again, and
// nothing is deleted meanwhile.
func (r *Reconciler) repairWhileInUse(ctx context.Context, cs *v1.CredentialSet) {
	if cs.Status.KeyGeneration == 0 || engine.RotationInFlight(cs.Status) {
		return
	}
	err := func() error {
		p, err := r.planFor(ctx, cs)
		if err != nil || p.noInstances {
			return err
		}
		src, err := r.getSourceSecret(ctx, cs)
		if err != nil || src == nil {
			return err
		}
		cur, missing := engine.Current(src.Data, p.backend.Keys())
		if len(missing) > 0 {
			return nil // lost from the source Secret: nothing to repair with
		}
		return repairBeforeRelease(ctx, p.backend, cur)
	}()
	if err != nil {
		logFrom(ctx).Info("could not repair the instances while the deleted set waits for its consumers; trying again on the next pass", "error", err.Error())
	}
}
