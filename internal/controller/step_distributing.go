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

// distributeRotation is step Distributing: every instance accepts the
// pending secrets, so write them to the distribution Secrets, record
// Distributed and restart the consumers onto them.
func (r *Reconciler) distributeRotation(ctx context.Context, t *turn) (ctrl.Result, *problem, error) {
	cs, p, src := t.cs, t.p, t.src
	id := cs.Status.RotationID
	gen := engine.TargetGeneration(cs.Spec.Rotation, cs.Status)
	// The engine runs this step only with the rotation's pending secrets
	// in the source Secret (it refuses otherwise).
	pending := engine.Pending(src.Data, p.backend.Keys())
	if err := r.serve(ctx, t, pending, gen); err != nil {
		prob, err := distributionProblem(ctx, err)
		return ctrl.Result{}, prob, err
	}
	failpoint.Hit("rotate/pending-distributed")
	now := metav1.NewTime(r.now())
	if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) {
		st.Phase, st.DistributedAt, st.RolledOutAt = v1.PhaseDistributed, &now, nil
		st.RestartID = engine.DistributedRestartID(id, t.sourceVersion())
		arrived(cs, st, gen, now)
	}); err != nil {
		return ctrl.Result{}, nil, err
	}
	failpoint.Hit("rotate/phase-distributed")
	if st := cs.Status.RotationStartedAt; st != nil {
		metrics.PhaseEnded(string(v1.PhaseRotating), now.Sub(st.Time))
	}
	r.stepEvent(cs, id, reason.Distributed, "Rotate", "new secrets of rotation %s distributed to %d Secrets; consumers restart, then discard the old secrets", id, distributionCount(cs, p))
	r.dropAnnotations(ctx, cs, engine.RotateAnnotation)
	// Restart consumers now rather than on the next event.
	if _, err := r.syncConsumers(ctx, t); err != nil {
		return ctrl.Result{}, nil, err
	}
	return ctrl.Result{RequeueAfter: engine.RequeueRollout}, nil, nil
}

// arrived completes the Distributed transition of a set that declares no
// consumer: with nothing to restart it rolled out the moment its secrets
// were distributed, and that is what the distribution Secrets hold. The
// transition's write records both, rather than observe in a second write.
func arrived(cs *v1.CredentialSet, st *v1.CredentialSetStatus, gen int64, now metav1.Time) {
	if engine.DeclaredConsumers(cs.Spec) > 0 {
		return
	}
	st.RolledOutAt = &now
	next := *cs
	next.Status = *st
	st.SecretHash = secretHash(&next, gen)
}
