package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// act runs the step the engine's decision names, or carries out a decision
// that runs none (a refusal, a wait, a served request dropped). A step ends
// with the status write that records it; what follows is decided by the
// engine, never by a step: in the same pass only where the decision says
// so (Decision.Then), otherwise by the next reconcile, which that write
// wakes.
func (r *Reconciler) act(ctx context.Context, t *turn, d engine.Decision, policyWhy string) (ctrl.Result, *problem, error) {
	cs := t.cs
	switch d.Action {
	case engine.None:
		return ctrl.Result{}, nil, nil
	case engine.DropRotateRequest:
		r.dropAnnotations(ctx, cs, engine.RotateAnnotation)
		return ctrl.Result{}, nil, nil
	case engine.DropDiscardRequest:
		r.dropAnnotations(ctx, cs, engine.DiscardAnnotation)
		return ctrl.Result{}, nil, nil
	case engine.DropAbortRequest:
		r.dropAnnotations(ctx, cs, engine.AbortAnnotation)
		return ctrl.Result{}, nil, nil
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
	}
	if d.ByPolicy {
		r.rotationEvent(cs, d.RotationID, "Normal", reason.PolicyTriggered, "Rotate", "rotation policy %s starts rotation %s: %s", cs.Spec.Rotation.Policy, d.RotationID, policyWhy)
	}
	// The step the engine named, then the one it says follows in the same
	// pass (d.Then, engine.Then) for as long as each completes: its status
	// write must leave the set in the step that follows.
	step, then := d.Step, d.Then
	for {
		res, prob, err := r.runStep(ctx, t, d, step)
		if err != nil || prob != nil || res.RequeueAfter != 0 || then == "" || engine.StepOf(cs.Status) != then {
			return res, prob, err
		}
		step, then = then, engine.Then(then)
	}
}

// runStep runs one step: each has one code path, in a file of its name.
func (r *Reconciler) runStep(ctx context.Context, t *turn, d engine.Decision, step v1.RotationStep) (ctrl.Result, *problem, error) {
	switch step {
	case engine.StepApplying:
		if d.Action == engine.ReadBackRotation {
			return r.readBackRotation(ctx, t)
		}
		if t.cs.Status.Phase != v1.PhaseRotating {
			return r.startRotation(ctx, t, d.RotationID)
		}
		return r.apply(ctx, t)
	case engine.StepDistributing:
		return r.distributeRotation(ctx, t)
	case engine.StepDiscarding:
		return r.discard(ctx, t, d.AutoDiscarded)
	case engine.StepConfirming:
		return r.confirm(ctx, t)
	case engine.StepRollingBack:
		if d.Action == engine.Recover {
			return r.recover(ctx, t, d.RecoverID, d.RecoverID != t.cs.Annotations[engine.RecoverAnnotation])
		}
		return r.rollback(ctx, t, d.RecoverID)
	case engine.StepResetting:
		return r.reset(ctx, t)
	}
	return ctrl.Result{}, nil, nil
}
