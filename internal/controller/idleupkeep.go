package controller

import (
	"context"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// idleDue: the set is at rest (Idle, no reset owed, no pending secrets in
// its source Secret, not being deleted) and has an instance to check, so
// every instance must hold the current secrets and nothing else rekey
// made: what the backend's IdleRepairer keeps true of an instance that
// returned from a scale-in with its old volume, or rebuilt empty.
func idleDue(cs *v1.CredentialSet, pending engine.PendingState, noInstances bool) bool {
	st := cs.Status
	return st.Phase == v1.PhaseIdle && st.KeyGeneration > 0 && !st.ResetPending && pending == engine.PendingNone &&
		!noInstances && cs.DeletionTimestamp.IsZero()
}

// idleUpkeep runs the backend's engine.IdleRepairer. Like the Distributed
// repair it is a problem to report, not an error, when it fails, and it
// asks the fence (which then confirms the status it was decided from)
// only before it writes: an Idle reconcile with nothing wrong costs no
// request to the API server.
func (r *Reconciler) idleUpkeep(ctx context.Context, t *turn) (*problem, error) {
	rp, ok := t.p.backend.(engine.IdleRepairer)
	if !ok {
		return nil, nil
	}
	err := rp.RepairIdle(withStatusConfirmed(ctx), t.cur)
	return upkeepProblem(ctx, err, "holds the current passwords and no retired one")
}
