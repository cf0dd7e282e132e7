package controller

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// observe writes what this reconcile saw — consumers, conditions — with
// the same compare-and-set as every transition, and only when it changed.
// known is the set's status as this reconcile knows it (its observation
// laid over cs.Status).
func (r *Reconciler) observe(ctx context.Context, cs *v1.CredentialSet, known v1.CredentialSetStatus, prob *problem, seen transportSeen, stuck stuckInfo) error {
	// What the server last returned in this reconcile (no second read:
	// the write below is guarded as every transition is); live when the
	// reconcile kept no view.
	live := serverView(ctx)
	if live == nil {
		live = &v1.CredentialSet{}
		if err := r.APIReader.Get(ctx, clientKey(cs), live); err != nil {
			return err
		}
	}
	if live.Status.Phase != cs.Status.Phase || live.Status.RotationID != cs.Status.RotationID {
		return nil // someone moved on; the next reconcile observes afresh
	}
	next := *live.Status.DeepCopy()
	want := len(cs.Spec.Consumers) + len(cs.Spec.ConsumerGroups)
	if known.Consumers != nil || want == 0 {
		next.Consumers, next.ConsumersUpdated = known.Consumers, known.ConsumersUpdated
	}
	if known.SecretHash != "" {
		next.SecretHash = known.SecretHash
	}
	if known.Cluster != "" {
		next.Cluster = known.Cluster
		next.RetirementWaitsFor = known.RetirementWaitsFor
	}
	if live.Status.KeyGeneration != 0 {
		next.NextRotationAt = known.NextRotationAt
	}
	next.Waiting = known.Waiting
	allOut := true
	var waiting []string
	for _, c := range next.Consumers {
		if !c.RolledOut {
			allOut = false
			waiting = append(waiting, fmt.Sprintf("%s %s: %s", c.Kind, strings.TrimPrefix(c.Namespace+"/"+c.Name, "/"), c.Message))
		}
	}
	if len(next.Consumers) != want {
		allOut = false
	}
	if (next.Phase == v1.PhaseDistributed || next.ResetPending) && allOut && next.RolledOutAt == nil {
		now := metav1.NewTime(r.now())
		next.RolledOutAt = &now
	}
	setConditions(&next, cs.Generation, prob, allOut, waiting)
	setStuckCondition(&next, cs.Generation, stuck)
	setTransportCondition(&next, cs.Generation, seen)
	next.ObservedGeneration = cs.Generation
	next.Step = engine.StepOf(next)
	if equality.Semantic.DeepEqual(next, live.Status) {
		return nil
	}
	wasStuck := meta.IsStatusConditionTrue(live.Status.Conditions, reason.CondRotationStuck)
	if err := r.casStatus(ctx, live, func(st *v1.CredentialSetStatus) { *st = next }); err != nil {
		return err
	}
	if stuck.message != "" && !wasStuck {
		// Once per stuck rotation: the condition and the metric stay.
		r.event(cs, "Warning", reason.RotationStuck, "Observe", "%s", stuck.message)
	}
	return nil
}

func setConditions(st *v1.CredentialSetStatus, gen int64, prob *problem, allOut bool, waiting []string) {
	setPhaseConditions(st, gen, prob)
	set := conditionSetter(st, gen)
	switch {
	case len(st.Consumers) == 0 && allOut:
		set(reason.CondRolloutComplete, true, reason.NoConsumers, "no consumer workloads to restart")
	case allOut:
		set(reason.CondRolloutComplete, true, reason.AllRolledOut, "every consumer runs the newest credentials")
	default:
		set(reason.CondRolloutComplete, false, reason.RolloutPending, strings.Join(waiting, "; "))
	}
}

// maxConditionMessage is the API's limit on a condition's message (bytes):
// a longer one would make the whole status write fail.
const maxConditionMessage = 32768

func conditionSetter(st *v1.CredentialSetStatus, gen int64) func(string, bool, reason.Reason, string) {
	return func(typ string, ok bool, why reason.Reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: string(why), Message: elide(msg, maxConditionMessage), ObservedGeneration: gen})
	}
}

// setPhaseConditions sets Ready, Degraded and Rotating from the phase and
// the problem seen (nil: none). A transition sets them in the same write
// as the phase, so that no reader ever sees a set Idle but still Degraded
// for a reason that belonged to the phase it left.
func setPhaseConditions(st *v1.CredentialSetStatus, gen int64, prob *problem) {
	set := conditionSetter(st, gen)
	switch {
	case prob != nil:
		set(reason.CondReady, false, prob.reason, prob.message)
		set(reason.CondDegraded, true, prob.reason, prob.message)
	case st.KeyGeneration == 0:
		set(reason.CondReady, false, reason.NotProvisioned, "credentials are being provisioned")
		set(reason.CondDegraded, false, reason.Healthy, "no problem seen")
	default:
		set(reason.CondReady, true, reason.Healthy, fmt.Sprintf("generation %d is served to every distribution target", st.KeyGeneration))
		set(reason.CondDegraded, false, reason.Healthy, "no problem seen")
	}
	switch st.Phase {
	case v1.PhaseRotating:
		set(reason.CondRotating, true, reason.InProgress, fmt.Sprintf("rotation %s: applying the new secrets on every instance", st.RotationID))
	case v1.PhaseDistributed:
		set(reason.CondRotating, true, reason.AwaitingDiscard, fmt.Sprintf("rotation %s: new secrets distributed; old ones stay valid until discard", st.RotationID))
	default:
		set(reason.CondRotating, false, reason.Idle, "no rotation active")
	}
}

func setStuckCondition(st *v1.CredentialSetStatus, gen int64, stuck stuckInfo) {
	c := metav1.Condition{Type: reason.CondRotationStuck, Status: metav1.ConditionFalse, Reason: string(reason.Healthy),
		Message: "no rotation has been active longer than rotation.stuckAfter", ObservedGeneration: gen}
	if stuck.message != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, string(reason.RotationStuck), stuck.message
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
