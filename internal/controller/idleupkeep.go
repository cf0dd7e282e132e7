package controller

import (
	"context"

	v1 "rekey.io/rekey/api/v1alpha1"
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
	if rf, ok := engine.AsRefusal(err); ok && quietUpkeep(reason.Reason(rf.Reason), t.cs.Status) {
		return nil, nil
	}
	return upkeepProblem(ctx, err, "holds the current passwords and no retired one")
}

// quietUpkeep: an upkeep refusal that is not news in st. The reset owed
// removes every second secret once the consumers rolled out, and runs
// before a key changed outside rekey can be taken (its own refusal says
// how, or the report comes at rest once it ran); a rotation that has not
// recorded its new secrets applied may have applied them before a crash
// (a second password, a new generation, a key changed in place), which its
// Apply takes up again (what is nobody's is refused there, with the same
// reads).
func quietUpkeep(r reason.Reason, st v1.CredentialSetStatus) bool {
	switch r {
	case reason.DualPasswordExists, reason.KeyMismatch:
		return st.ResetPending || st.Phase == v1.PhaseRotating
	}
	return false
}
