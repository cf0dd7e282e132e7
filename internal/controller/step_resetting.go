package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// reset finishes a rollback. Once every consumer rolled out the current
// secrets, the backend is reset to accept only them, and only then does the
// source Secret drop the pending data: a secret the backend still accepts is
// never missing from it (stored before applied). Each step is idempotent.
func (r *Reconciler) reset(ctx context.Context, t *turn) (ctrl.Result, *problem, error) {
	cs, p, src := t.cs, t.p, t.src
	keys := p.backend.Keys()
	cur, _ := engine.Current(src.Data, keys)
	if err := r.serve(ctx, t, cur, cs.Status.KeyGeneration); err != nil {
		prob, err := distributionProblem(ctx, err)
		return ctrl.Result{}, prob, err
	}
	rolledOut, err := r.syncConsumers(ctx, t)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	if !rolledOut {
		return ctrl.Result{RequeueAfter: engine.RequeueRollout}, nil, nil
	}
	if err := r.fence(ctx); err != nil {
		return ctrl.Result{}, nil, err
	}
	if err := p.backend.Reset(ctx, cur); err != nil {
		return ctrl.Result{}, nil, err
	}
	failpoint.Hit("reset/backend-reset")
	if _, err := r.writeSourceSecret(ctx, cs, src, engine.WithoutPending(src.Data, keys)); err != nil {
		return ctrl.Result{}, nil, err
	}
	if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) {
		st.ResetPending, st.RolledOutAt, st.RotationKeys = false, nil, nil
	}); err != nil {
		return ctrl.Result{}, nil, err
	}
	r.event(cs, "Normal", reason.ResetApplied, "Reset", "every instance accepts only the current secrets again (generation %d) (step %s)", cs.Status.KeyGeneration, engine.StepOf(cs.Status))
	r.dropAnnotations(ctx, cs, engine.AbortAnnotation, engine.RecoverAnnotation)
	return ctrl.Result{}, nil, nil
}
