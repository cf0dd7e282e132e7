package controller

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/metrics"
	"rekey.io/rekey/internal/reason"
)

// rollback undoes an active rotation in the one order that locks no one out:
// status first (Idle, so distribution serves the current secrets again and
// consumers restart onto them), then the source Secret, then — once the
// consumers rolled out — the backend (reset). Until that reset the backend
// accepts both, so no consumer loses its login at any step.
func (r *Reconciler) rollback(ctx context.Context, t *turn, recoverID string) (ctrl.Result, *problem, error) {
	cs := t.cs
	id := cs.Status.RotationID
	// Consumers may hold the new secrets once distribution served them
	// (RotateApplied): a new restart value restarts every consumer onto the
	// current ones before the backend forgets the new ones, also when no
	// rotation ever completed (there is no earlier value to return to).
	served := cs.Status.RotateApplied || cs.Status.Phase == v1.PhaseDistributed
	if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) {
		if served {
			st.RestartID = engine.RollbackRestartID(id, t.sourceVersion())
		}
		st.Phase, st.RotationID = v1.PhaseIdle, ""
		st.RotateApplied, st.DiscardApplied, st.DiscardStarted, st.ResetPending = false, false, false, true
		st.RotationStartedAt, st.DistributedAt, st.RolledOutAt = nil, nil, nil
		st.LastRolledBackID = id
		if recoverID != "" {
			st.LastRecoverID = recoverID
		}
	}); err != nil {
		return ctrl.Result{}, nil, err
	}
	failpoint.Hit("abort/phase-idle")
	result := metrics.ResultAborted
	if recoverID != "" {
		// Recovery rolls back a rotation that could not go on (its
		// pending secrets stale, missing or rejected).
		result = metrics.ResultFailed
	}
	metrics.Ended(cs.Namespace, cs.Name, result)
	// The request that started the rolled-back rotation must not start it
	// again (status.lastRolledBackID marks it stale should this fail).
	if cs.Annotations[engine.RotateAnnotation] == id {
		r.dropAnnotations(ctx, cs, engine.RotateAnnotation, engine.DiscardAnnotation)
	}
	why := "on request (kubectl rekey abort)"
	if recoverID != "" {
		why = "to recover (kubectl rekey recover)"
	}
	r.stepEvent(cs, id, reason.RotationAborted, "Abort", "rotation %s rolled back %s: consumers return to the current secrets, then every instance is reset to them", id, why)
	// The next reconcile distributes the current secrets, restarts the
	// consumers, and resets the backend once they rolled out and the grace
	// period passed.
	return ctrl.Result{RequeueAfter: time.Second}, nil, nil
}

// recover marks an idle set for a backend reset: a secondary secret that
// nobody accounts for (DualPasswordExists) is removed once consumers run
// the current secrets. Consumers restart first: an idle status does not
// prove they run the current secrets (a status and source Secret restored
// from a backup while they ran a later rotation's), and the reset would
// refuse whatever else they hold. leftover: started by the engine, not
// asked for, for pending secrets some keys were left with
// (engine.LeftoverRecoverID).
func (r *Reconciler) recover(ctx context.Context, t *turn, id string, leftover bool) (ctrl.Result, *problem, error) {
	cs := t.cs
	if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) {
		st.ResetPending, st.LastRecoverID, st.RolledOutAt = true, id, nil
		// The reset covers every key the spec lists, whatever an
		// earlier rotation began with.
		st.RotationKeys = nil
		st.RestartID = engine.RecoverRestartID(id, t.sourceVersion())
	}); err != nil {
		return ctrl.Result{}, nil, err
	}
	if leftover {
		keys := engine.Pending(t.src.Data, t.p.backend.Keys()).SortedKeys()
		r.stepEvent(cs, id, reason.RecoveryStarted, "Recover", "the source Secret holds new secrets of %v that no rotation accounts for (a user listed again in the spec after the rotation or rollback that went on without it ended), and its consumers may hold either: recovery %s restarts them onto the current secrets, then every instance is reset to them", keys, id)
	} else {
		r.stepEvent(cs, id, reason.RecoveryStarted, "Recover", "recovery %s: consumers restart onto the current secrets of the source Secret, then every instance is reset to them", id)
	}
	return ctrl.Result{RequeueAfter: time.Second}, nil, nil
}
