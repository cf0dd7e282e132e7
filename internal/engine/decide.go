package engine

import (
	"fmt"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// Trigger annotations: one-shot requests carrying a rotation ID; status,
// not the annotation, says whether a request was served.
const (
	RotateAnnotation  = "rekey.io/rotate"
	DiscardAnnotation = "rekey.io/discard"
	// AbortAnnotation carries the active rotation ID to roll back.
	AbortAnnotation = "rekey.io/abort"
	// RecoverAnnotation carries a fresh request ID: roll back whatever
	// rotation is active, or reset the backend to the current secrets.
	RecoverAnnotation = "rekey.io/recover"
)

// RequeueRollout is how often a held phase is re-checked even if a watch
// event is missed: a requeue rather than an error, since waiting for a
// rollout is not a failure.
const RequeueRollout = 15 * time.Second

// Input is everything the decision depends on, gathered by the controller.
type Input struct {
	Status         v1.CredentialSetStatus
	RotateRequest  string // rekey.io/rotate value, "" when absent
	DiscardRequest string // rekey.io/discard value, "" when absent
	AbortRequest   string // rekey.io/abort value, "" when absent
	RecoverRequest string // rekey.io/recover value, "" when absent
	// PolicyRotation is the rotation the rotation policy asks for (Due),
	// "" for none; a rotate request wins over it.
	PolicyRotation string
	// Irreversible: the active rotation has (or may have) invalidated the
	// current secrets already (a backend without Overlap that applied), so
	// it can only complete.
	Irreversible bool
	// CurrentRefused: with a recover request at rest, a backend without
	// Overlap refuses the current secrets (its keys were replaced in place
	// since: a status and source Secret restored from a backup, or a key
	// changed outside rekey), with its refusal. A reset cannot bring them
	// back, and consumers restarted onto them would be refused.
	CurrentRefused string
	NoInstances    bool // e.g. a StatefulSet scaled to 0
	Pending        PendingState
	Policy         v1.DiscardPolicy
	GracePeriod    time.Duration
	// Consumers is how many consumers the set declares (workloads and
	// groups): AfterRollout needs one to prove the new secrets are used.
	Consumers     int
	RolloutDone   bool      // every consumer rolled out the active rotation
	RolloutDoneAt time.Time // since when (for AfterRollout's grace period)
	Now           time.Time
	// Deleting: the set is being deleted. A rotation in flight completes
	// (or is aborted); none starts.
	Deleting bool
	// Generation is the set's metadata.generation: it names the recovery
	// a reconcile starts by itself (LeftoverRecoverID).
	Generation int64
	// Overlap: the backend keeps the current and the pending secrets
	// valid together (Traits.Overlap), so a reset to the current ones
	// refuses nobody who was restarted onto them.
	Overlap bool
	// ReadBack: the backend mints its secrets and hands them back
	// (Traits.ReadBack).
	ReadBack bool
}

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Step is the step the controller runs for this decision: the step
	// the action performs, or for a decision that performs none (Wait,
	// Refuse, None, dropping a served request) the step the set stays in.
	Step v1.RotationStep
	// Then is the step run right after Step in the same pass once Step
	// completed (Then's), "" when the pass ends with Step.
	Then          v1.RotationStep
	RotationID    string // for StartRotation
	RecoverID     string // for Rollback and Recover started by a recover request
	Reason        reason.Reason
	Message       string
	DropRotate    bool // remove the rotate annotation (with Refuse)
	DropDiscard   bool // remove the discard annotation (with Refuse)
	DropAbort     bool // remove the abort annotation (with Refuse)
	Requeue       time.Duration
	Until         time.Time // when a Wait ends by itself (a grace period's end); zero when something else ends it
	AutoDiscarded bool      // Discard was started by the AfterRollout policy
	ByPolicy      bool      // StartRotation was asked for by the rotation policy
}

// RotationInFlight: a rotation (or the reset that rolls one back) has
// begun and not ended, so the backend may accept more than the current
// secrets, or consumers may hold others. A deleted set finishes it before
// it winds down.
func RotationInFlight(st v1.CredentialSetStatus) bool {
	return st.Phase == v1.PhaseRotating || st.Phase == v1.PhaseDistributed || st.ResetPending
}

// Decide is the rotation state machine (Idle → Rotating → Distributed →
// Idle, with rollback) as a pure function: what runs next, in which step,
// and why. Phase 1 work always wins: rotate and discard never run in one
// reconcile.
func Decide(in Input) Decision {
	d := decide(in)
	d.Step = RunsStep(d.Action, in.Status)
	switch d.Action {
	case ContinueRotation, Discard, Rollback, Recover, Reset, ReadBackRotation:
		d.Then = Then(d.Step)
	case StartRotation:
		// Recording the rotation is the first half of Applying; the
		// second (staging and applying the secrets) follows in the same
		// pass unless the source Secret holds another rotation's pending
		// secrets, which the next pass refuses from the recorded status.
		if in.Pending == PendingNone {
			d.Then = StepApplying
		}
	}
	return d
}

func decide(in Input) Decision {
	if d, ok := decideRollback(in); ok {
		return d
	}
	st := in.Status
	switch st.Phase {
	case v1.PhaseRotating:
		return decideRotating(in)
	case v1.PhaseDistributed:
		if in.RotateRequest != "" {
			if in.RotateRequest == st.RotationID {
				// Phase 1 is done; the request was served.
				return Decision{Action: DropRotateRequest}
			}
			return Decision{Action: Refuse, Reason: reason.RotateRefused, DropRotate: true,
				Message: fmt.Sprintf("rotation %s is still active (Distributed): discard it (kubectl rekey discard) before requesting another; request %s was removed", st.RotationID, in.RotateRequest)}
		}
		return decideDiscard(in)
	default: // Idle, or never set
		if st.ResetPending {
			// A rollback finishes before anything else starts. The grace
			// period covers consumers nobody declared, which may have read
			// the new secrets just before the distribution switched back.
			if !in.RolloutDone {
				return Decision{Action: Wait, Reason: reason.WaitingForRollout, Requeue: RequeueRollout}
			}
			if until := in.RolloutDoneAt.Add(in.GracePeriod); until.After(in.Now) {
				return Decision{Action: Wait, Requeue: until.Sub(in.Now), Until: until}
			}
			return Decision{Action: Reset}
		}
		if in.Deleting {
			// Whatever asks for a rotation, a deleted set only winds down:
			// the finalizer runs now.
			return Decision{Action: None}
		}
		if in.Pending == PendingPartial && in.Overlap {
			// Pending secrets with no rotation: a user the spec stopped
			// listing while Distributed, left out of the discard (or the
			// reset) that ended the rotation, and listed again. The
			// instances may accept both its secrets and its consumers may
			// hold either, so it is what a rollback leaves: consumers
			// restart onto the current secret, every instance accepts both
			// until then, and the reset drops the other.
			return Decision{Action: Recover, RecoverID: LeftoverRecoverID(in.Generation), Reason: reason.RecoveryStarted}
		}
		if in.RotateRequest != "" {
			if in.RotateRequest == st.LastRotationID || in.RotateRequest == st.LastRolledBackID {
				// Left over after a completed or rolled-back cycle
				// (best-effort removal failed).
				return Decision{Action: DropRotateRequest}
			}
			if in.NoInstances {
				return Decision{Action: Refuse, Reason: reason.RotateRefused, Requeue: RequeueRollout,
					Message: "no running instances (replicas: 0): new secrets could not be applied anywhere; scale the cluster up and the rotation starts"}
			}
			return Decision{Action: StartRotation, RotationID: in.RotateRequest}
		}
		if in.PolicyRotation != "" {
			if in.NoInstances {
				return Decision{Action: Refuse, Reason: reason.RotateRefused, Requeue: RequeueRollout,
					Message: "the rotation policy asks for a rotation, but there are no running instances (replicas: 0): scale the cluster up and it starts"}
			}
			return Decision{Action: StartRotation, RotationID: in.PolicyRotation, ByPolicy: true}
		}
		if in.DiscardRequest != "" {
			if in.DiscardRequest == st.LastRotationID {
				return Decision{Action: DropDiscardRequest}
			}
			return Decision{Action: Refuse, Reason: reason.DiscardSkipped, DropDiscard: true,
				Message: fmt.Sprintf("no rotation is active, so discard %s has nothing to discard; the request was removed: start one with kubectl rekey rotate", in.DiscardRequest)}
		}
		return Decision{Action: None}
	}
}

func decideRotating(in Input) Decision {
	st := in.Status
	if readBackOwed(in) {
		return Decision{Action: ReadBackRotation}
	}
	switch in.Pending {
	case PendingStale:
		return Decision{Action: Refuse, Reason: reason.StaleRotationPending, Requeue: time.Minute,
			Message: fmt.Sprintf("the source Secret holds pending secrets of another rotation, not %s: an earlier rotation was interrupted; run kubectl rekey recover", st.RotationID)}
	case PendingPartial:
		if in.ReadBack && !st.RotateApplied {
			break // Apply hands back what it applied before the loss
		}
		return Decision{Action: Refuse, Reason: reason.MissingRotationPending, Requeue: time.Minute,
			Message: fmt.Sprintf("the source Secret lost some pending secrets of rotation %s; they cannot be recovered from the backend: run kubectl rekey recover", st.RotationID)}
	case PendingNone:
		if st.RotateApplied {
			return Decision{Action: Refuse, Reason: reason.MissingRotationPending, Requeue: time.Minute,
				Message: fmt.Sprintf("the source Secret lost the pending secrets of rotation %s after they were applied: run kubectl rekey recover", st.RotationID)}
		}
	}
	if in.NoInstances {
		return Decision{Action: Refuse, Reason: reason.RotateRefused, Requeue: RequeueRollout,
			Message: "no running instances (replicas: 0): scale the cluster up and the rotation resumes"}
	}
	return Decision{Action: ContinueRotation}
}

func decideDiscard(in Input) Decision {
	st := in.Status
	requested := in.DiscardRequest != ""
	if requested && in.DiscardRequest != st.RotationID {
		if in.DiscardRequest == st.LastRotationID {
			return Decision{Action: DropDiscardRequest}
		}
		return Decision{Action: Refuse, Reason: reason.DiscardSkipped, DropDiscard: true,
			Message: fmt.Sprintf("discard %s does not match the active rotation %s; the request was removed: use kubectl rekey discard, which takes the active ID", in.DiscardRequest, st.RotationID)}
	}
	if !st.RotateApplied {
		return Decision{Action: Refuse, Reason: reason.DiscardSkipped, DropDiscard: requested,
			Message: "phase 1 has not been applied to every instance; the discard request was removed: re-apply it after the rotation reaches Distributed"}
	}
	if st.DiscardApplied {
		// Old secrets are gone already; only confirmation remains.
		return Decision{Action: Discard, AutoDiscarded: !requested}
	}
	if in.Pending != PendingMatch && readBackOwed(in) {
		return Decision{Action: ReadBackRotation}
	}
	if in.Pending != PendingMatch {
		r := reason.MissingRotationPending
		if in.Pending == PendingStale {
			r = reason.StaleRotationPending
		}
		if st.DiscardStarted {
			// Some instances may refuse the old secrets already: rolling
			// back would lock consumers out, so recover cannot help.
			return Decision{Action: Refuse, Reason: r, Requeue: time.Minute,
				Message: fmt.Sprintf("the source Secret lost the pending secrets of rotation %s after discarding the old ones began, so the rotation can neither complete nor roll back: restore the source Secret (rekey.<namespace>.<name> in the operator's namespace) from a backup taken after the rotation started", st.RotationID)}
		}
		return Decision{Action: Refuse, Reason: r, Requeue: time.Minute,
			Message: fmt.Sprintf("the source Secret does not hold the pending secrets of rotation %s, so old secrets cannot be discarded: run kubectl rekey recover", st.RotationID)}
	}
	if in.NoInstances && (requested || st.DiscardStarted || in.Policy == v1.DiscardAfterRollout) {
		return Decision{Action: Refuse, Reason: reason.DiscardRefused, Requeue: RequeueRollout,
			Message: "no running instances (replicas: 0): the new secrets cannot be verified; scale the cluster up and discard proceeds"}
	}
	if st.DiscardStarted {
		// Discarding began on some instances and stopped (an instance
		// down, a crash): finishing it is the only way forward, with or
		// without a request.
		return Decision{Action: Discard, AutoDiscarded: !requested}
	}
	auto := in.Policy == v1.DiscardAfterRollout
	if !requested && !auto {
		return Decision{Action: None}
	}
	if !requested && !AutoDiscards(in.Policy, in.Consumers) {
		return Decision{Action: Refuse, Reason: reason.AutoDiscardHeld, Requeue: RequeueRollout,
			Message: "discardPolicy AfterRollout retires the old secrets only once a declared consumer has moved to the new ones, and this set declares no consumers: discard by hand once every client uses the new secrets (kubectl rekey discard), or declare the clients in spec.consumers or spec.consumerGroups"}
	}
	if !in.RolloutDone {
		return Decision{Action: Wait, Reason: reason.WaitingForRollout, Requeue: RequeueRollout,
			Message: "waiting for every consumer to roll out the new credentials before discarding the old ones"}
	}
	if !requested {
		if until := in.RolloutDoneAt.Add(in.GracePeriod); until.After(in.Now) {
			return Decision{Action: Wait, Requeue: until.Sub(in.Now), Until: until}
		}
	}
	return Decision{Action: Discard, AutoDiscarded: !requested}
}

// AutoDiscards: the operator retires old secrets by itself (AfterRollout)
// only for a set with at least one declared consumer (workload or group),
// the evidence that the new secrets are in use.
func AutoDiscards(policy v1.DiscardPolicy, consumers int) bool {
	return policy == v1.DiscardAfterRollout && consumers > 0
}

// DeclaredConsumers counts a spec's consumers: workloads and groups.
func DeclaredConsumers(spec v1.CredentialSetSpec) int {
	return len(spec.Consumers) + len(spec.ConsumerGroups)
}

// Distribution says what consumers' Secrets hold: current secrets when
// idle, pending ones from the moment every instance accepts them, and
// nothing (stand down) while a rotation has not yet applied them.
func Distribution(st v1.CredentialSetStatus, pending PendingState) (usePending, write bool) {
	switch {
	case st.Phase == v1.PhaseDistributed && !st.DiscardApplied:
		return true, pending == PendingMatch
	case st.Phase == v1.PhaseDistributed:
		// Pending may already be confirmed into current: both are the same secrets.
		return pending == PendingMatch, true
	case st.Phase == v1.PhaseRotating:
		return true, st.RotateApplied && pending == PendingMatch
	default:
		return false, true
	}
}

// decideRollback serves abort and recover requests, which win over rotate
// and discard: a rollback is what an operator asks for when something is
// wrong.
func decideRollback(in Input) (Decision, bool) {
	st := in.Status
	active := Active(st)
	committed, why := Committed(st, in.Irreversible)
	if r := in.RecoverRequest; r != "" && r != st.LastRecoverID {
		switch {
		case active && committed:
			return Decision{Action: Refuse, Reason: reason.AbortSkipped, Message: fmt.Sprintf(
				"%s: it can only complete; remove the recover request and let it finish", why)}, true
		case active && in.CurrentRefused != "":
			return Decision{Action: Refuse, Reason: reason.AbortSkipped, Message: rollbackRefused(st.RotationID) +
				"; remove the recover request and complete the rotation (kubectl rekey discard)"}, true
		case active:
			return Decision{Action: Rollback, RecoverID: r}, true
		case in.CurrentRefused != "":
			// Held, not dropped: once the backend's keys are current
			// again (read back), the recover runs.
			return Decision{Action: Refuse, Reason: reason.KeyMismatch, Message: fmt.Sprintf(
				"recover %s waits: the backend no longer accepts the current secrets of the source Secret, so consumers restarted onto them would be refused and a reset cannot bring them back: %s", r, in.CurrentRefused)}, true
		default:
			return Decision{Action: Recover, RecoverID: r}, true
		}
	}
	if a := in.AbortRequest; a != "" {
		switch {
		case !active || a != st.RotationID:
			if !active && st.ResetPending {
				return Decision{}, false // served; dropped when the reset completes
			}
			if !active && a == st.LastRolledBackID {
				// Served; its removal failed (best effort) after the reset.
				return Decision{Action: DropAbortRequest}, true
			}
			return Decision{Action: Refuse, Reason: reason.AbortSkipped, DropAbort: true, Message: fmt.Sprintf(
				"abort %s does not match an active rotation (phase %s, rotation %q); the request was removed: kubectl rekey abort takes the active ID", a, st.Phase, st.RotationID)}, true
		case committed:
			return Decision{Action: Refuse, Reason: reason.AbortSkipped, DropAbort: true, Message: fmt.Sprintf(
				"%s, so rolling back would lock consumers out; it can only complete", why)}, true
		case in.CurrentRefused != "":
			return Decision{Action: Refuse, Reason: reason.AbortSkipped, DropAbort: true, Message: rollbackRefused(a) +
				"; the request was removed: complete the rotation (kubectl rekey discard)"}, true
		default:
			return Decision{Action: Rollback}, true
		}
	}
	return Decision{}, false
}
