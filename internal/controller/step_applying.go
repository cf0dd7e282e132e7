package controller

import (
	"context"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// startRotation begins step Applying: refuse what kubectl rekey check would
// refuse, then record Phase=Rotating before anything touches the backend.
// The rest of the step (apply) follows in the same pass when the decision
// says so; else the next reconcile decides from the recorded rotation.
func (r *Reconciler) startRotation(ctx context.Context, t *turn, id string) (ctrl.Result, *problem, error) {
	cs, p, src := t.cs, t.p, t.src
	cur, _ := engine.Current(src.Data, p.backend.Keys())
	// The checks kubectl rekey check runs, before anything is recorded:
	// a rotation that would stop half way on a missing privilege or
	// consumer is refused with the list instead.
	if err := r.preflight(ctx, t, id); err != nil {
		return ctrl.Result{}, nil, err
	}
	if err := p.backend.Precheck(ctx, cur); err != nil {
		return ctrl.Result{RequeueAfter: time.Minute}, nil, err
	}
	version, err := p.backend.Version(ctx, cur)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	target := engine.TargetGeneration(cs.Spec.Rotation, cs.Status)
	started := metav1.NewTime(r.now())
	if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) {
		st.Phase, st.RotationID = v1.PhaseRotating, id
		// A key listed after this is left out of it (engine.OutsideRotation).
		st.RotationKeys = slices.Sorted(slices.Values(p.backend.Keys()))
		st.TargetGeneration, st.TargetKeyVersion = target, version
		st.RotateApplied, st.DiscardApplied, st.DiscardStarted = false, false, false
		st.RotationStartedAt, st.DistributedAt, st.RolledOutAt = &started, nil, nil
	}); err != nil {
		return ctrl.Result{}, nil, err
	}
	failpoint.Hit("rotate/phase-rotating")
	r.stepEvent(cs, id, reason.RotationStarted, "Rotate", "rotation %s started", id)
	return ctrl.Result{}, nil, nil
}

// apply is the rest of step Applying: store the pending secrets, make
// every instance accept them beside the current ones, record
// rotateApplied.
func (r *Reconciler) apply(ctx context.Context, t *turn) (ctrl.Result, *problem, error) {
	cs, p, src := t.cs, t.p, t.src
	keys := p.backend.Keys()
	id := cs.Status.RotationID
	gen := engine.TargetGeneration(cs.Spec.Rotation, cs.Status)
	readBack := p.backend.Traits().ReadBack
	cur, _ := engine.Current(src.Data, keys)
	if !readBack && engine.InspectPending(src.Data, keys, id) == engine.PendingNone {
		// Stored before applied: no backend learns a secret that
		// is not in the source Secret first.
		fresh, err := p.backend.NewSecrets(gen)
		if err != nil {
			return ctrl.Result{}, nil, err
		}
		if src, err = r.writeSourceSecret(ctx, cs, src, engine.WithPending(src.Data, fresh, id)); err != nil {
			return ctrl.Result{}, nil, err
		}
		t.src = src // what Distributing, next in this pass, reads
		failpoint.Hit("rotate/pending-stored")
	}
	var pending engine.Secrets
	if engine.InspectPending(src.Data, keys, id) == engine.PendingMatch {
		pending = engine.Pending(src.Data, keys)
	}
	if err := r.fence(ctx); err != nil {
		return ctrl.Result{}, nil, err
	}
	held, err := p.backend.Apply(ctx, cur, pending, gen)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	// A StatefulSet scaled up while Apply ran has a pod Apply never
	// saw; without this, phase 1 was recorded and the new
	// secrets distributed while that pod refused them, until the next
	// reconcile's repair. Apply again, over every instance.
	if added, err := r.instancesAdded(ctx, cs, p); err != nil || added {
		return ctrl.Result{RequeueAfter: time.Second}, nil, err
	}
	if readBack && !maps.Equal(held, pending) {
		// Read back from the backend, which minted them: the
		// backend's answer is the truth, also after a crash. But only
		// from the set as it is: a copy older than its status (a cache
		// that lags) may be of a rotation distributed since, whose key a
		// person then changed, and the pending secret the consumers were
		// given must not change under the restart value they rolled
		// out with (the status write below would fail too late).
		if err := r.confirmStatus(ctx, cs); err != nil {
			return ctrl.Result{}, nil, err
		}
		if t.src, err = r.writeSourceSecret(ctx, cs, src, engine.WithPending(src.Data, held, id)); err != nil {
			return ctrl.Result{}, nil, err
		}
		failpoint.Hit("rotate/pending-stored")
	}
	if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) { st.RotateApplied = true }); err != nil {
		return ctrl.Result{}, nil, err
	}
	failpoint.Hit("rotate/rotate-applied")
	r.stepEvent(cs, id, reason.RotateApplied, "Rotate", "every instance accepts the new secrets of rotation %s%s", id, overlapNote(p))
	return ctrl.Result{}, nil, nil
}

// readBackRotation is step Applying again for a rotation whose new secrets
// the source Secret lost after a backend that mints them applied them
// (engine.ReadBackRotation): recorded as not applied (with DistributedAt
// kept, so that Distributing restarts the consumers anew, and
// discardStarted kept: a discard that began only ever finishes), then
// apply, in which the backend hands back the keys it holds.
func (r *Reconciler) readBackRotation(ctx context.Context, t *turn) (ctrl.Result, *problem, error) {
	if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) {
		st.Phase, st.RotateApplied, st.RolledOutAt = v1.PhaseRotating, false, nil
	}); err != nil {
		return ctrl.Result{}, nil, err
	}
	failpoint.Hit("rotate/read-back-recorded")
	return r.apply(ctx, t)
}

func overlapNote(p *plan) string {
	if p.backend.Traits().Overlap {
		return ", and still the current ones"
	}
	return "; the old ones were replaced in place, so consumers restart now"
}
