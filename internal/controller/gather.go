package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// serveDistribution keeps the distribution Secrets serving what the
// backend accepts. It stands down while a rotation has not applied its
// secrets. A failure it can name is returned as a problem, not an error:
// the engine still decides, as a rollback may be what repairs it.
func (r *Reconciler) serveDistribution(ctx context.Context, t *turn, u engine.Upkeep) (*problem, error) {
	if !u.Serve {
		return nil, nil
	}
	secrets := t.cur
	if u.UsePending {
		secrets = engine.Pending(t.src.Data, t.p.backend.Keys())
	}
	err := r.serve(ctx, t, secrets, r.servedGeneration(t.cs))
	if err == nil {
		return nil, nil
	}
	prob, err := distributionProblem(ctx, err)
	if prob == nil {
		if prob = classify(err); prob == nil {
			return nil, err
		}
	}
	return prob, nil
}

// holdRetirement records the backend cluster and what retiring the old
// credentials waits for (backends whose old identity is shared state of a
// cluster). While either holds retirement, a Distributed rotation counts
// as not rolled out. A cluster that cannot be identified is returned as
// the hold: until the discard is applied, it keeps the discard from
// starting or going on (retirementHeld), and nothing else: abort and
// recover still run, as a rollback's reset is not retirement.
func (r *Reconciler) holdRetirement(ctx context.Context, t *turn, rolledOut bool) (bool, *problem) {
	cluster, waiting, prob := scopeMoved(ctx, t.p, t.known())
	t.obs.cluster = cluster
	t.obs.retirementWaitsFor, t.obs.retirementSeen = waiting, true
	st := t.cs.Status
	if (prob == nil && len(waiting) == 0) || st.Phase != v1.PhaseDistributed {
		return rolledOut, nil
	}
	if prob != nil && !st.DiscardApplied {
		return false, prob
	}
	return false, nil
}

// retirementHeld is the hold to report for a set in st after decision d:
// retires says d would retire the old credentials (a discard), which the
// hold stops; otherwise the reconcile goes on and reports the hold at its
// end while the set still has something to retire.
func retirementHeld(hold *problem, d engine.Decision, st v1.CredentialSetStatus) (_ *problem, retires bool) {
	if hold == nil || st.Phase != v1.PhaseDistributed || st.DiscardApplied {
		return nil, false
	}
	return hold, d.Action == engine.Discard
}

// instancesRecheck is how often a set that waits for an instance of a
// cluster scaled to zero looks again. Scaling its StatefulSet up wakes
// the set at once (registry.Entry.StatefulSets); this poll is only a
// safety net, so a set left at zero for days costs a reconcile every few
// minutes and writes nothing.
const instancesRecheck = 5 * time.Minute

// scaledToZero is the problem when decision d is the engine's refusal for
// a cluster with no instance (replicas: 0): a rotation requested or under
// way, a discard asked for or due. It is said once: when the Degraded
// condition already states it, t.obs.saidOnce keeps the Warning from
// being recorded again. Nil for any other decision.
func scaledToZero(t *turn, d engine.Decision) *problem {
	if !noInstanceRefusal(t.p.noInstances, d) {
		return nil
	}
	prob := &problem{d.Reason, d.Message}
	t.obs.saidOnce = saidAlready(t.cs.Status.Conditions, prob)
	return prob
}

// noInstanceRefusal: d is one of the engine's refusals for a cluster with
// no instance, which keep every request for when one is back.
func noInstanceRefusal(noInstances bool, d engine.Decision) bool {
	return noInstances && d.Action == engine.Refuse && !d.DropRotate && !d.DropDiscard && !d.DropAbort &&
		(d.Reason == reason.RotateRefused || d.Reason == reason.DiscardRefused)
}

// saidAlready: the Degraded condition states prob (an earlier reconcile
// wrote it, then recorded its Warning).
func saidAlready(conds []metav1.Condition, prob *problem) bool {
	c := meta.FindStatusCondition(conds, reason.CondDegraded)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == string(prob.reason) &&
		c.Message == elide(prob.message, maxConditionMessage)
}

// decisionInput is what the engine decides on: the set's status and
// requests, the plan, and what the upkeep found. It also records when the
// rotation policy rotates next; due says why it rotates now, if it does.
func (r *Reconciler) decisionInput(ctx context.Context, t *turn, rolledOut bool) (engine.Input, engine.PolicyDue, error) {
	cs := t.cs
	in := engine.Input{
		Status:         t.known(),
		RotateRequest:  cs.Annotations[engine.RotateAnnotation],
		DiscardRequest: engine.DiscardRequested(cs.Annotations[engine.DiscardAnnotation], cs.Spec.Rotation, t.known()),
		AbortRequest:   cs.Annotations[engine.AbortAnnotation],
		RecoverRequest: cs.Annotations[engine.RecoverAnnotation],
		NoInstances:    t.p.noInstances,
		Pending:        t.pending,
		Policy:         cs.Spec.Rotation.DiscardPolicy,
		GracePeriod:    r.gracePeriod(cs),
		Consumers:      engine.DeclaredConsumers(cs.Spec),
		RolloutDone:    rolledOut,
		Now:            r.now(),
		Deleting:       !cs.DeletionTimestamp.IsZero(),
		Generation:     cs.Generation,
		Overlap:        t.p.backend.Traits().Overlap,
		ReadBack:       t.p.backend.Traits().ReadBack,
	}
	var err error
	if in.Irreversible, err = r.irreversible(ctx, t); err != nil {
		return in, engine.PolicyDue{}, err
	}
	if in.CurrentRefused, err = r.currentRefused(ctx, t); err != nil {
		return in, engine.PolicyDue{}, err
	}
	if at := cs.Status.RolledOutAt; at != nil {
		in.RolloutDoneAt = at.Time
	} else {
		in.RolloutDoneAt = in.Now
	}
	due, err := r.policyDue(ctx, t, in.Now)
	if err != nil {
		return in, due, err
	}
	in.PolicyRotation = due.RotationID
	t.obs.nextRotationAt, t.obs.policySeen = nil, true
	if due.NextAt != nil {
		at := metav1.NewTime(*due.NextAt)
		t.obs.nextRotationAt = &at
	}
	return in, due, nil
}

// irreversible: a backend without overlap invalidated the current secrets
// once it applied. When a rollback is requested before rekey recorded that,
// the backend is asked (a crash may have come between the two): a current
// secret it no longer accepts means the rotation can only complete.
func (r *Reconciler) irreversible(ctx context.Context, t *turn) (bool, error) {
	st, traits := t.cs.Status, t.p.backend.Traits()
	if engine.AppliedInPlace(st, traits) {
		return true, nil
	}
	if traits.Overlap || !engine.Active(st) {
		return false, nil
	}
	if t.pending != engine.PendingNone {
		return true, nil
	}
	if t.cs.Annotations[engine.AbortAnnotation] == "" && t.cs.Annotations[engine.RecoverAnnotation] == "" {
		return false, nil
	}
	// Only a current secret the backend no longer accepts proves the
	// rotation applied; any other refusal (an old version, an unhealthy
	// cluster) says nothing about it.
	why, err := keyRefused(ctx, t.p.backend, t.cur)
	return why != "", err
}

// currentRefused asks a backend whose keys a reset cannot set back (one
// without Overlap, or one that mints its keys: ReadBack), before a recover
// or an abort restarts the consumers onto the current secrets, whether it
// still accepts them (engine.Input.CurrentRefused): its keys may have been
// replaced since (a status and source Secret restored from a backup taken
// before a rotation applied, or a key changed outside rekey). A backend
// that does not answer holds the request until it does.
func (r *Reconciler) currentRefused(ctx context.Context, t *turn) (string, error) {
	st := t.cs.Status
	id := t.cs.Annotations[engine.RecoverAnnotation]
	tr := t.p.backend.Traits()
	asked := id != "" && id != st.LastRecoverID && !st.ResetPending ||
		engine.Active(st) && t.cs.Annotations[engine.AbortAnnotation] == st.RotationID
	if tr.Overlap && !tr.ReadBack || !asked {
		return "", nil
	}
	return keyRefused(ctx, t.p.backend, t.cur)
}

// keyRefused asks the backend's Precheck whether it still accepts cur: its
// KeyMismatch refusal, "" for any other answer (an old version, an
// unhealthy cluster say nothing about the keys), or the error of a backend
// that did not answer.
func keyRefused(ctx context.Context, b engine.Backend, cur engine.Secrets) (string, error) {
	err := b.Precheck(ctx, cur)
	if rf, refused := engine.AsRefusal(err); refused {
		if rf.Reason == string(reason.KeyMismatch) {
			return rf.Message, nil
		}
		return "", nil
	}
	return "", err
}

// policyDue asks the rotation policy; the backend's version is read only
// when the policy needs it.
func (r *Reconciler) policyDue(ctx context.Context, t *turn, now time.Time) (engine.PolicyDue, error) {
	cs := t.cs
	in := engine.PolicyInput{Rotation: cs.Spec.Rotation, Status: t.known(), Now: now}
	idle := cs.Status.Phase == v1.PhaseIdle || cs.Status.Phase == ""
	if cs.Spec.Rotation.Policy == v1.PolicyWithVersionUpgrade && idle && !cs.Status.ResetPending {
		v, err := t.p.backend.Version(ctx, t.cur)
		if err != nil {
			return engine.PolicyDue{}, fmt.Errorf("read the backend version for policy WithVersionUpgrade: %w", err)
		}
		in.Version = v
	}
	return engine.Due(in), nil
}

// servedGeneration is the generation of what consumers are given.
func (r *Reconciler) servedGeneration(cs *v1.CredentialSet) int64 {
	if cs.Status.Phase != v1.PhaseIdle && cs.Status.RotateApplied {
		return engine.TargetGeneration(cs.Spec.Rotation, cs.Status)
	}
	return cs.Status.KeyGeneration
}

func (r *Reconciler) gracePeriod(cs *v1.CredentialSet) time.Duration {
	if g := cs.Spec.Rotation.GracePeriod; g != nil {
		return g.Duration
	}
	return r.DefaultGracePeriod
}
