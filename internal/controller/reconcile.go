package controller

import (
	"context"
	"fmt"
	"maps"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// reconcile gathers what the set's world holds, lets the engine decide, and
// carries the decision out. Before deciding it runs the upkeep steps every
// reconcile owes whatever the decision (engine.UpkeepOf), in the order of
// engine.UpkeepSteps: repair an instance that lost the rotation's users,
// serve the distribution Secrets, restart consumers.
// What it measures goes to obs, which the status writes carry.
func (r *Reconciler) reconcile(ctx context.Context, cs *v1.CredentialSet, obs *observation) (ctrl.Result, *problem, error) {
	if prob, err := r.checkNamespaces(ctx, cs); err != nil || prob != nil {
		// Consent is granted on the Namespace, which rekey does not watch.
		return ctrl.Result{RequeueAfter: consentRecheck}, prob, err
	}
	t, err := r.load(ctx, cs, obs)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	if cs.Status.KeyGeneration == 0 {
		return ctrl.Result{}, nil, r.provision(ctx, cs, t.p, t.src)
	}
	if prob, err := r.readSource(ctx, t); err != nil || prob != nil {
		return ctrl.Result{}, prob, err
	}

	// Upkeep: the steps every reconcile owes, decided by the engine from
	// the status and the source Secret (engine.UpkeepSteps).
	u := engine.UpkeepOf(cs.Status, t.pending, t.p.noInstances)
	repairProb, err := r.repairInstances(ctx, t, u.Repair)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	distProb, err := r.serveDistribution(ctx, t, u)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	t.unserved = distProb != nil
	rolledOut, err := r.syncCoverage(ctx, t)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	rolledOut, hold := r.holdRetirement(ctx, t, rolledOut)

	// Decide.
	in, due, err := r.decisionInput(ctx, t, rolledOut)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	d := engine.Decide(in)
	t.obs.setWaiting(engine.Waiting(in, d), engine.WindowWaiting(due))
	// Why a set does (or does not) move, for whoever debugs a stalled one
	// (--zap-log-level=debug); decisions carry no secrets.
	logFrom(ctx).V(1).Info("decided", "phase", cs.Status.Phase, "rotation", cs.Status.RotationID, "upkeep", u,
		"action", d.Action.String(), "reason", string(d.Reason), "requeue", d.Requeue.String(), "rolledOut", rolledOut,
		"rotateRequest", in.RotateRequest, "discardRequest", in.DiscardRequest)
	if distProb != nil && d.Action != engine.Rollback && d.Action != engine.Recover {
		// Distribution failed: only a rollback may go ahead, as it is what
		// repairs a source Secret the backend refuses.
		return ctrl.Result{RequeueAfter: engine.RequeueRollout}, distProb, nil
	}

	if repairProb != nil && startsDiscard(d, cs.Status) {
		return ctrl.Result{RequeueAfter: repairRecheck}, repairProb, nil
	}
	if prob := scaledToZero(t, d); prob != nil {
		return ctrl.Result{RequeueAfter: instancesRecheck}, prob, nil
	}
	if held, retires := retirementHeld(hold, d, cs.Status); retires {
		return ctrl.Result{RequeueAfter: engine.RequeueRollout}, held, nil
	}

	// Act.
	res, prob, err := r.act(ctx, t, d, due.Why)
	// A transition may have changed what the Secrets hold.
	r.noteHash(t)
	if err != nil || prob != nil {
		return res, prob, err
	}
	if prob = stuckRollout(t.known()); prob != nil {
		return res, prob, nil
	}
	if repairProb != nil && !quietUpkeep(repairProb.reason, cs.Status) {
		// (Asked again of the status the step left: a recover that began
		// makes a key changed outside rekey the reset's to report.)
		return requeueWithin(res, repairRecheck), repairProb, nil
	}
	if held, _ := retirementHeld(hold, d, cs.Status); held != nil {
		return requeueWithin(res, engine.RequeueRollout), held, nil
	}
	if due.Problem != nil {
		// Only the schedule stops: whatever else the decision did went on.
		return res, &problem{reason.InvalidSpec, due.Problem.Error() +
			"; fix the CredentialSet spec: until then policy Schedule starts no rotation (rotate requests and discards go on)"}, nil
	}
	if due.NextAt != nil && d.Action == engine.None {
		if left := due.NextAt.Sub(in.Now); left > 0 {
			res = requeueWithin(res, left)
		}
	}
	return res, nil, nil
}

// requeueWithin makes res come back within d at the latest.
func requeueWithin(res ctrl.Result, d time.Duration) ctrl.Result {
	if res.RequeueAfter == 0 || d < res.RequeueAfter {
		res.RequeueAfter = d
	}
	return res
}

// load builds the plan for the set's spec, keeps its finalizers in step
// with it, and reads the source Secret (nil when there is none).
func (r *Reconciler) load(ctx context.Context, cs *v1.CredentialSet, obs *observation) (*turn, error) {
	p, err := r.planFor(ctx, cs)
	if err != nil {
		return nil, err
	}
	obs.transport = transportOf(p.backend)
	if err := r.syncFinalizers(ctx, cs); err != nil {
		return nil, err
	}
	src, err := r.getSourceSecret(ctx, cs)
	if err != nil {
		return nil, err
	}
	if !cs.DeletionTimestamp.IsZero() && engine.RotationInFlight(cs.Status) {
		// Only finishRotation reconciles a deleted set with a rotation in
		// flight as usual (deleted).
		noRollback, err := r.rollbackBlocked(ctx, p, cs, src)
		if err != nil {
			return nil, err
		}
		r.rotationEvent(cs, cs.Status.RotationID, "Normal", reason.DeletionWaiting, "Delete", "%s", deletionWaitNote(cs, noRollback))
	}
	return &turn{cs: cs, p: p, src: src, obs: obs}, nil
}

// readSource reads the current secrets and the state of the pending ones
// from a provisioned set's source Secret. Keys without a current secret
// are identities added to the spec, provisioned now if they can be
// (addIdentities), or secrets lost, which only a restore from backup can
// bring back.
func (r *Reconciler) readSource(ctx context.Context, t *turn) (*problem, error) {
	if t.src == nil {
		return &problem{reason.MissingRotationPending, fmt.Sprintf(
			"source Secret %s/%s is gone, and with it the only copy of the current secrets; restore it from backup (rekey never recreates it, to avoid locking consumers out)", r.Namespace, naming.SourceSecretName(t.cs))}, nil
	}
	keys := t.p.backend.Keys()
	cur, missing := engine.Current(t.src.Data, keys)
	if len(missing) > 0 {
		if prob, err := r.addIdentities(ctx, t, cur, missing); err != nil || prob != nil {
			return prob, err
		}
		// Added, or left out of an in-flight rotation (a narrower backend).
		keys = t.p.backend.Keys()
		cur, _ = engine.Current(t.src.Data, keys)
	}
	t.full = t.p.backend
	if out := engine.OutsideRotation(t.cs.Status, keys); len(out) > 0 {
		if n, ok := t.p.backend.(engine.Narrower); ok {
			if b, ok := n.Without(out); ok {
				t.p.backend, keys = b, b.Keys()
				t.outside, _ = engine.Current(t.src.Data, out)
				cur, _ = engine.Current(t.src.Data, keys)
			}
		}
	}
	t.cur, t.pending = cur, engine.InspectPending(t.src.Data, keys, t.cs.Status.RotationID)
	return nil, nil
}

// served is what the distribution Secrets hold, rendered by the backend
// that knows every key served: s, beside the current secrets of keys left
// out of the rotation in flight.
func (t *turn) served(s engine.Secrets) (engine.Backend, engine.Secrets) {
	if len(t.outside) == 0 {
		return t.p.backend, s
	}
	all := maps.Clone(s)
	maps.Copy(all, t.outside)
	return t.full, all
}
