package controller

import (
	"context"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

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
	if rf, ok := engine.AsRefusal(err); ok && rf.Reason == string(reason.DualPasswordExists) && t.cs.Status.ResetPending {
		// The reset owed removes every second password once the
		// consumers rolled out: nothing to report meanwhile.
		return nil, nil
	}
	return upkeepProblem(ctx, err, "holds the current passwords and no retired one")
}
