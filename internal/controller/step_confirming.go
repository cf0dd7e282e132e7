package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/metrics"
	"rekey.io/rekey/internal/reason"
)

// confirm is step Confirming: no instance accepts the old secrets any
// more, so the pending secrets become the current ones in the source
// Secret, and the set goes Idle with the next generation.
func (r *Reconciler) confirm(ctx context.Context, t *turn) (ctrl.Result, *problem, error) {
	cs, p, src := t.cs, t.p, t.src
	keys := p.backend.Keys()
	id := cs.Status.RotationID
	if _, err := r.writeSourceSecret(ctx, cs, src, engine.Confirm(src.Data, keys)); err != nil {
		return ctrl.Result{}, nil, err
	}
	failpoint.Hit("discard/confirmed")
	now := metav1.NewTime(r.now())
	gen := engine.TargetGeneration(cs.Spec.Rotation, cs.Status)
	confirmed, _ := engine.Current(engine.Confirm(src.Data, keys), keys)
	priors, err := priorCount(ctx, p, confirmed)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	distributedAt := cs.Status.DistributedAt
	if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) {
		st.LastRotationID, st.RotationID, st.RotationKeys = id, "", nil
		st.Phase, st.RotateApplied, st.DiscardApplied, st.DiscardStarted = v1.PhaseIdle, false, false, false
		st.KeyGeneration, st.CurrentSince = gen, &now
		st.KeyVersion, st.PriorKeyCount = st.TargetKeyVersion, priors
		st.TargetGeneration, st.TargetKeyVersion = 0, ""
		st.RotationStartedAt, st.DistributedAt, st.RolledOutAt = nil, nil, nil
	}); err != nil {
		return ctrl.Result{}, nil, err
	}
	failpoint.Hit("discard/phase-idle")
	metrics.Ended(cs.Namespace, cs.Name, metrics.ResultCompleted)
	if distributedAt != nil {
		metrics.PhaseEnded(string(v1.PhaseDistributed), now.Sub(distributedAt.Time))
	}
	r.stepEvent(cs, id, reason.RotationCompleted, "Discard", "rotation %s complete: generation %d is current", id, gen)
	r.dropAnnotations(ctx, cs, engine.RotateAnnotation, engine.DiscardAnnotation)
	return ctrl.Result{}, nil, nil
}
