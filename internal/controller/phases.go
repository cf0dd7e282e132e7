package controller

import (
	"context"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/metrics"
	"rekey.io/rekey/internal/reason"
)

// act carries out one decision of the engine.
func (r *Reconciler) act(ctx context.Context, t *turn, d engine.Decision, policyWhy string) (ctrl.Result, *problem, error) {
	cs := t.cs
	switch d.Action {
	case engine.DropRotateRequest:
		r.dropAnnotations(ctx, cs, engine.RotateAnnotation)
	case engine.DropDiscardRequest:
		r.dropAnnotations(ctx, cs, engine.DiscardAnnotation)
	case engine.DropAbortRequest:
		r.dropAnnotations(ctx, cs, engine.AbortAnnotation)
	case engine.Refuse:
		if d.DropAbort {
			r.dropAnnotations(ctx, cs, engine.AbortAnnotation)
		}
		if d.DropRotate {
			r.dropAnnotations(ctx, cs, engine.RotateAnnotation)
		}
		if d.DropDiscard {
			r.dropAnnotations(ctx, cs, engine.DiscardAnnotation)
		}
		return ctrl.Result{RequeueAfter: d.Requeue}, &problem{d.Reason, d.Message}, nil
	case engine.Wait:
		if d.Reason == reason.WaitingForRollout {
			r.noteWaiting(cs, t.known(), d)
		}
		return ctrl.Result{RequeueAfter: d.Requeue}, nil, nil
	case engine.StartRotation:
		if d.ByPolicy {
			r.rotationEvent(cs, d.RotationID, "Normal", reason.PolicyTriggered, "Rotate", "rotation policy %s starts rotation %s: %s", cs.Spec.Rotation.Policy, d.RotationID, policyWhy)
		}
		return r.startRotation(ctx, t, d.RotationID)
	case engine.ContinueRotation:
		return r.continueRotation(ctx, t)
	case engine.Discard:
		return r.discard(ctx, t, d.AutoDiscarded)
	case engine.Rollback:
		return r.rollback(ctx, t, d.RecoverID)
	case engine.Recover:
		return r.recover(ctx, t, d.RecoverID)
	case engine.Reset:
		return r.reset(ctx, t)
	}
	return ctrl.Result{}, nil, nil
}

// startRotation is phase 1's start: refuse on a dual password
// nobody can account for, else persist Phase=Rotating before touching the
// backend.
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
		st.TargetGeneration, st.TargetKeyVersion = target, version
		st.RotateApplied, st.DiscardApplied, st.DiscardStarted = false, false, false
		st.RotationStartedAt, st.DistributedAt, st.RolledOutAt = &started, nil, nil
	}); err != nil {
		return ctrl.Result{}, nil, err
	}
	failpoint.Hit("rotate/phase-rotating")
	r.rotationEvent(cs, id, "Normal", reason.RotationStarted, "Rotate", "rotation %s started", id)
	pending := engine.InspectPending(src.Data, p.backend.Keys(), id)
	if d := engine.Decide(engine.Input{Status: cs.Status, Pending: pending}); d.Action != engine.ContinueRotation {
		return r.act(ctx, t, d, "")
	}
	return r.continueRotation(ctx, t)
}

// continueRotation is the rest of phase 1: store the pending secrets, apply
// them to every instance, distribute them, and record Distributed.
func (r *Reconciler) continueRotation(ctx context.Context, t *turn) (ctrl.Result, *problem, error) {
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
		failpoint.Hit("rotate/pending-stored")
	}
	var pending engine.Secrets
	if engine.InspectPending(src.Data, keys, id) == engine.PendingMatch {
		pending = engine.Pending(src.Data, keys)
	}
	if !cs.Status.RotateApplied {
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
			// backend's answer is the truth, also after a crash.
			if src, err = r.writeSourceSecret(ctx, cs, src, engine.WithPending(src.Data, held, id)); err != nil {
				return ctrl.Result{}, nil, err
			}
			failpoint.Hit("rotate/pending-stored")
		}
		pending = held
		if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) { st.RotateApplied = true }); err != nil {
			return ctrl.Result{}, nil, err
		}
		failpoint.Hit("rotate/rotate-applied")
		r.rotationEvent(cs, id, "Normal", reason.RotateApplied, "Rotate", "every instance accepts the new secrets of rotation %s%s", id, overlapNote(p))
	}
	if err := r.distribute(ctx, cs, p, pending, gen); err != nil {
		prob, err := distributionProblem(ctx, err)
		return ctrl.Result{}, prob, err
	}
	failpoint.Hit("rotate/pending-distributed")
	now := metav1.NewTime(r.now())
	if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) {
		st.Phase, st.DistributedAt, st.RolledOutAt = v1.PhaseDistributed, &now, nil
		st.RestartID = id
		arrived(cs, st, gen, now)
	}); err != nil {
		return ctrl.Result{}, nil, err
	}
	failpoint.Hit("rotate/phase-distributed")
	if st := cs.Status.RotationStartedAt; st != nil {
		metrics.PhaseEnded(string(v1.PhaseRotating), now.Sub(st.Time))
	}
	r.rotationEvent(cs, id, "Normal", reason.Distributed, "Rotate", "new secrets of rotation %s distributed to %d Secrets; consumers restart, then discard the old secrets", id, distributionCount(cs, p))
	r.dropAnnotations(ctx, cs, engine.RotateAnnotation)
	// Restart consumers now rather than on the next event.
	if _, err := r.syncConsumers(ctx, t); err != nil {
		return ctrl.Result{}, nil, err
	}
	return ctrl.Result{RequeueAfter: engine.RequeueRollout}, nil, nil
}

// discard is phase 2: DISCARD everywhere (connecting with the new
// secrets), confirm pending into current, back to Idle with the next
// generation.
func (r *Reconciler) discard(ctx context.Context, t *turn, auto bool) (ctrl.Result, *problem, error) {
	cs, p, src := t.cs, t.p, t.src
	keys := p.backend.Keys()
	id := cs.Status.RotationID
	if !cs.Status.DiscardApplied {
		if !cs.Status.DiscardStarted {
			if g, ok := p.backend.(engine.DiscardGate); ok {
				// While the cluster is unhealthy or an instance does not
				// answer, nothing is recorded: the rotation may still
				// roll back.
				cur, _ := engine.Current(src.Data, keys)
				if err := g.CheckDiscardHealth(ctx, cur, engine.Pending(src.Data, keys)); err != nil {
					return ctrl.Result{}, nil, err
				}
			}
			// Every instance must accept the new secrets before the first
			// drops the old ones: one that refuses them (a user changed
			// by hand, IDENTIFIED BY keeping the secondary, which repair
			// takes for applied) would refuse the discard once it began,
			// and then neither abort nor recover could help.
			if err := p.backend.Verify(ctx, engine.Pending(src.Data, keys)); err != nil {
				return ctrl.Result{}, nil, err
			}
			// Recorded before the first instance drops anything: an
			// interrupted discard (a crash between instances, an instance
			// lost half way) leaves some instances refusing the old
			// secrets, so from here the only way forward is to finish it.
			if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) { st.DiscardStarted = true }); err != nil {
				return ctrl.Result{}, nil, err
			}
			failpoint.Hit("discard/discard-started")
		}
		cur, _ := engine.Current(src.Data, keys)
		if err := r.fence(ctx); err != nil {
			return ctrl.Result{}, nil, err
		}
		if err := p.backend.Retire(ctx, cur, engine.Pending(src.Data, keys)); err != nil {
			return ctrl.Result{}, nil, err
		}
		// Likewise a pod added while Retire ran would keep the old
		// secrets valid after Idle (and refuse the next rotation's
		// precheck with DualPasswordExists): Retire again first.
		if added, err := r.instancesAdded(ctx, cs, p); err != nil || added {
			return ctrl.Result{RequeueAfter: time.Second}, nil, err
		}
		if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) { st.DiscardApplied = true }); err != nil {
			return ctrl.Result{}, nil, err
		}
		failpoint.Hit("discard/discard-applied")
		metrics.Retired(cs.Namespace, cs.Name)
		how := "on request"
		if auto {
			how = "by the AfterRollout policy"
		}
		r.rotationEvent(cs, id, "Normal", reason.DiscardApplied, "Discard", "old secrets of rotation %s discarded on every instance (%s)", id, how)
	}
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
		st.LastRotationID, st.RotationID = id, ""
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
	r.rotationEvent(cs, id, "Normal", reason.RotationCompleted, "Discard", "rotation %s complete: generation %d is current", id, gen)
	r.dropAnnotations(ctx, cs, engine.RotateAnnotation, engine.DiscardAnnotation)
	return ctrl.Result{}, nil, nil
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

func overlapNote(p *plan) string {
	if p.backend.Traits().Overlap {
		return ", and still the current ones"
	}
	return "; the old ones were replaced in place, so consumers restart now"
}
