package controller

import (
	"fmt"
	"strings"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// stuckInfo is the RotationStuck signal of one reconcile.
type stuckInfo struct {
	message string        // the condition's message while stuck, else ""
	left    time.Duration // until the active rotation would count as stuck
}

func (r *Reconciler) stuckAfter(cs *v1.CredentialSet) time.Duration {
	if d := cs.Spec.Rotation.StuckAfter; d != nil {
		return d.Duration
	}
	return r.DefaultStuckAfter
}

// rotationStuck: a rotation active longer than stuckAfter is a signal to
// alert on (old and new credentials both valid, or a phase on hold); the
// message says what it waits for, so the person paged knows the next step.
// st is the set's status as this reconcile knows it.
func (r *Reconciler) rotationStuck(cs *v1.CredentialSet, st v1.CredentialSetStatus, prob *problem) stuckInfo {
	after := r.stuckAfter(cs)
	stuck, active, left := engine.RotationStuck(st, r.now(), after)
	if !stuck {
		return stuckInfo{left: left}
	}
	return stuckInfo{message: fmt.Sprintf("rotation %s has been active for %s (step %s of phase %s; rotation.stuckAfter %s) and waits for %s",
		st.RotationID, active.Round(time.Second), engine.StepOf(st), st.Phase, after, waitsFor(cs, st, prob))}
}

func waitsFor(cs *v1.CredentialSet, st v1.CredentialSetStatus, prob *problem) string {
	if prob != nil {
		return fmt.Sprintf("a problem to be fixed (%s): %s", prob.reason, prob.message)
	}
	if st.Phase == v1.PhaseRotating {
		return "every instance to accept the new secrets; the phase retries by itself, and the Events and the manager's log say what fails"
	}
	var waiting []string
	for _, c := range st.Consumers {
		if !c.RolledOut {
			waiting = append(waiting, fmt.Sprintf("%s %s: %s", c.Kind, strings.TrimPrefix(c.Namespace+"/"+c.Name, "/"), c.Message))
		}
	}
	if len(waiting) > 0 {
		return "consumers to roll out the new credentials: " + strings.Join(waiting, "; ")
	}
	if len(st.RetirementWaitsFor) > 0 {
		return "consumers to move to the new user: " + strings.Join(st.RetirementWaitsFor, "; ")
	}
	if cs.Spec.Rotation.DiscardPolicy != v1.DiscardAfterRollout {
		return fmt.Sprintf("a discard request (discardPolicy Manual): once every client uses the new credentials, run kubectl rekey discard %s -n %s", cs.Name, cs.Namespace)
	}
	if !engine.AutoDiscards(cs.Spec.Rotation.DiscardPolicy, engine.DeclaredConsumers(cs.Spec)) {
		// Said from the spec, not from this reconcile's problem: a
		// reconcile that ended in an error has none, and the signal
		// must not promise a discard that never comes by itself.
		return fmt.Sprintf("a discard request (%s: discardPolicy AfterRollout retires nothing by itself in a set that declares no consumers): once every client uses the new credentials, run kubectl rekey discard %s -n %s", reason.AutoDiscardHeld, cs.Name, cs.Namespace)
	}
	return "the grace period after the rollout (rotation.gracePeriod), or a discard request (kubectl rekey discard)"
}
