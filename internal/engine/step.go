package engine

import v1 "rekey.io/rekey/api/v1alpha1"

// The steps of a set's life, within its phase. Each names what runs next
// (or what the set waits for), so a user, a maintainer and the controller
// answer "where is this set" with one word.
const (
	StepProvisioning    v1.RotationStep = "Provisioning"
	StepIdle            v1.RotationStep = "Idle"
	StepApplying        v1.RotationStep = "Applying"
	StepDistributing    v1.RotationStep = "Distributing"
	StepAwaitingRollout v1.RotationStep = "AwaitingRollout"
	StepAwaitingDiscard v1.RotationStep = "AwaitingDiscard"
	StepDiscarding      v1.RotationStep = "Discarding"
	StepConfirming      v1.RotationStep = "Confirming"
	StepRollingBack     v1.RotationStep = "RollingBack"
	StepResetting       v1.RotationStep = "Resetting"
)

// StepInfo is one row of the step table.
type StepInfo struct {
	Step  v1.RotationStep
	Phase v1.RotationPhase
	// State: what the status says in this step.
	State string
	// Next: what runs next, or what the set waits for.
	Next string
}

// Steps is the step table, in the order a rotation goes through it. The
// state machine section of the concepts page is checked against it.
var Steps = []StepInfo{
	{StepProvisioning, v1.PhasePending, "no credentials yet (keyGeneration 0)",
		"create the users or keys generation 1 needs, store and distribute their secrets, then Idle"},
	{StepIdle, v1.PhaseIdle, "one generation valid; nothing in flight",
		"a rotate request, or the rotation policy, starts a rotation (Applying)"},
	{StepApplying, v1.PhaseRotating, "rotation recorded; rotateApplied false",
		"stage new secrets in the source Secret, make every instance accept old and new, then Distributing"},
	{StepDistributing, v1.PhaseRotating, "rotateApplied true",
		"write the new secrets to the distribution Secrets, record Distributed, restart the consumers"},
	{StepAwaitingRollout, v1.PhaseDistributed, "a declared consumer has not rolled out the new secrets",
		"wait for every consumer to run the new secrets (the rollout gate)"},
	{StepAwaitingDiscard, v1.PhaseDistributed, "every consumer rolled out, or none is declared",
		"a discard request, or AfterRollout once gracePeriod passed, starts the discard"},
	{StepDiscarding, v1.PhaseDistributed, "discardStarted true; discardApplied false",
		"make every instance refuse the old secrets; from here the rotation can only complete"},
	{StepConfirming, v1.PhaseDistributed, "discardApplied true",
		"move the new secrets into current in the source Secret, then Idle with keyGeneration+1"},
	{StepRollingBack, v1.PhaseIdle, "resetPending true; a consumer has not rolled back",
		"wait for every consumer to run the current secrets again"},
	{StepResetting, v1.PhaseIdle, "resetPending true; every consumer rolled back",
		"after gracePeriod, make every instance accept only the current secrets"},
}

// StepOf derives a set's step from its status alone, so it can be written
// with every status write and read by anyone who can read the status.
func StepOf(st v1.CredentialSetStatus) v1.RotationStep {
	rolledOut := st.RolledOutAt != nil
	switch {
	case st.ResetPending && rolledOut:
		return StepResetting
	case st.ResetPending:
		return StepRollingBack
	}
	switch st.Phase {
	case v1.PhaseRotating:
		if st.RotateApplied {
			return StepDistributing
		}
		return StepApplying
	case v1.PhaseDistributed:
		switch {
		case st.DiscardApplied:
			return StepConfirming
		case st.DiscardStarted:
			return StepDiscarding
		case rolledOut || len(st.Consumers) == 0:
			return StepAwaitingDiscard
		default:
			return StepAwaitingRollout
		}
	case v1.PhaseIdle:
		return StepIdle
	default:
		return StepProvisioning
	}
}

// RunsStep is the step an action of Decide runs in a set whose status is
// st: the controller has one code path per step, and a decision that acts
// names it. An action that changes nothing leaves the set in its step.
func RunsStep(a Action, st v1.CredentialSetStatus) v1.RotationStep {
	switch a {
	case StartRotation, ReadBackRotation:
		return StepApplying
	case ContinueRotation:
		if st.RotateApplied {
			return StepDistributing
		}
		return StepApplying
	case Discard:
		if st.DiscardApplied {
			return StepConfirming
		}
		return StepDiscarding
	case Rollback, Recover:
		return StepRollingBack
	case Reset:
		return StepResetting
	}
	return StepOf(st)
}

// Then is the step one pass runs right after step completed: a follower
// that needs nothing but the outcome of step (no wait, no request, no
// answer from outside the pass). Running it in the same pass is what one
// step per pass would do one reconcile later, after re-reading what this
// pass wrote: the same work, without the reads (BenchmarkAPIRequests).
func Then(step v1.RotationStep) v1.RotationStep {
	switch step {
	case StepApplying:
		return StepDistributing
	case StepDiscarding:
		return StepConfirming
	}
	return ""
}
