package engine

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// TestNextStep answers, for a set in each step, "what runs next, and
// why": the step Decide names (the one code path the controller runs), the
// step the same pass runs after it if it completes, the action, and the
// reason when the set does not move.
func TestNextStep(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	out := metav1.NewTime(now.Add(-time.Hour))
	one := []v1.ConsumerStatus{{Kind: "Deployment", Name: "app"}}
	idle := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, LastRotationID: "r0"}
	applying := v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r1", KeyGeneration: 2}
	distributing := applying
	distributing.RotateApplied = true
	awaitingRollout := distributing
	awaitingRollout.Phase, awaitingRollout.Consumers = v1.PhaseDistributed, one
	awaitingDiscard := awaitingRollout
	awaitingDiscard.RolledOutAt = &out
	discarding := awaitingDiscard
	discarding.DiscardStarted = true
	confirming := discarding
	confirming.DiscardApplied = true
	rollingBack := idle
	rollingBack.ResetPending, rollingBack.Consumers = true, one
	resetting := rollingBack
	resetting.RolledOutAt = &out

	cases := []struct {
		name   string
		in     Input
		step   v1.RotationStep
		then   v1.RotationStep
		action Action
		why    reason.Reason // the reason a set that does not move gives
	}{
		{"idle, nothing asked: stays", Input{Status: idle}, StepIdle, "", None, ""},
		{"idle, a rotate request: the rotation is recorded and applied", Input{Status: idle, RotateRequest: "r1"}, StepApplying, StepApplying, StartRotation, ""},
		{"idle, the policy is due: likewise", Input{Status: idle, PolicyRotation: "schedule-1"}, StepApplying, StepApplying, StartRotation, ""},
		{"idle, a leftover pending in the source Secret: the rotation is recorded, the next pass refuses it", Input{Status: idle, RotateRequest: "r1", Pending: PendingStale}, StepApplying, "", StartRotation, ""},
		{"idle, no instance: refused, stays", Input{Status: idle, RotateRequest: "r1", NoInstances: true}, StepIdle, "", Refuse, reason.RotateRefused},
		{"idle, a recover request: consumers roll back first", Input{Status: idle, RecoverRequest: "x1"}, StepRollingBack, "", Recover, ""},
		{"applying: stage and apply", Input{Status: applying, Pending: PendingMatch}, StepApplying, StepDistributing, ContinueRotation, ""},
		{"applying, another rotation's pending: refused, stays", Input{Status: applying, Pending: PendingStale}, StepApplying, "", Refuse, reason.StaleRotationPending},
		{"applying, an abort: roll back", Input{Status: applying, AbortRequest: "r1"}, StepRollingBack, "", Rollback, ""},
		{"distributing: distribute and record Distributed", Input{Status: distributing, Pending: PendingMatch}, StepDistributing, "", ContinueRotation, ""},
		{"distributing, pending lost: refused, stays", Input{Status: distributing, Pending: PendingNone}, StepDistributing, "", Refuse, reason.MissingRotationPending},
		{"distributing, pending lost, keys replaced in place: read back, then distributed", Input{Status: distributing, Pending: PendingNone, ReadBack: true}, StepApplying, StepDistributing, ReadBackRotation, ""},
		{"distributing, pending lost, read back with overlap: read back too", Input{Status: distributing, Pending: PendingNone, ReadBack: true, Overlap: true}, StepApplying, StepDistributing, ReadBackRotation, ""},
		{"distributing, pending lost, minted by rekey with overlap: refused (recover restores the old ones)", Input{Status: distributing, Pending: PendingNone, Overlap: true}, StepDistributing, "", Refuse, reason.MissingRotationPending},
		{"applying, some pending lost, keys replaced in place: apply hands them back", Input{Status: applying, Pending: PendingPartial, ReadBack: true}, StepApplying, StepDistributing, ContinueRotation, ""},
		{"awaiting discard, pending lost, keys replaced in place: read back, then distributed", Input{Status: awaitingDiscard, Pending: PendingNone, ReadBack: true, DiscardRequest: "r1", RolloutDone: true}, StepApplying, StepDistributing, ReadBackRotation, ""},
		{"discarding, pending lost, keys replaced in place: read back", Input{Status: discarding, Pending: PendingPartial, ReadBack: true}, StepApplying, StepDistributing, ReadBackRotation, ""},
		{"confirming, pending moved to current: confirm (nothing to read back)", Input{Status: confirming, Pending: PendingNone, ReadBack: true}, StepConfirming, "", Discard, ""},
		{"awaiting discard, pending lost, minted by rekey: refused", Input{Status: awaitingDiscard, Pending: PendingNone, Overlap: true, DiscardRequest: "r1", RolloutDone: true}, StepAwaitingDiscard, "", Refuse, reason.MissingRotationPending},
		{"awaiting rollout, a discard request: waits", Input{Status: awaitingRollout, Pending: PendingMatch, DiscardRequest: "r1"}, StepAwaitingRollout, "", Wait, reason.WaitingForRollout},
		{"awaiting rollout, AfterRollout: waits", Input{Status: awaitingRollout, Pending: PendingMatch, Policy: v1.DiscardAfterRollout, Consumers: 1}, StepAwaitingRollout, "", Wait, reason.WaitingForRollout},
		{"awaiting discard, Manual, nothing asked: stays", Input{Status: awaitingDiscard, Pending: PendingMatch, Policy: v1.DiscardManual, RolloutDone: true}, StepAwaitingDiscard, "", None, ""},
		{"awaiting discard, a discard request: discard", Input{Status: awaitingDiscard, Pending: PendingMatch, DiscardRequest: "r1", RolloutDone: true}, StepDiscarding, StepConfirming, Discard, ""},
		{"awaiting discard, AfterRollout past its grace period: discard", Input{Status: awaitingDiscard, Pending: PendingMatch, Policy: v1.DiscardAfterRollout, Consumers: 1,
			RolloutDone: true, RolloutDoneAt: out.Time, GracePeriod: time.Minute, Now: now}, StepDiscarding, StepConfirming, Discard, ""},
		{"awaiting discard, an abort: roll back", Input{Status: awaitingDiscard, Pending: PendingMatch, AbortRequest: "r1"}, StepRollingBack, "", Rollback, ""},
		{"awaiting discard, an abort, the current secrets refused: refused, stays", Input{Status: awaitingDiscard, Pending: PendingMatch, AbortRequest: "r1", CurrentRefused: "changed"}, StepAwaitingDiscard, "", Refuse, reason.AbortSkipped},
		{"awaiting discard, a recover, the current secrets refused: refused, stays", Input{Status: awaitingDiscard, Pending: PendingMatch, RecoverRequest: "x1", CurrentRefused: "changed"}, StepAwaitingDiscard, "", Refuse, reason.AbortSkipped},
		{"discarding: finish it, asked or not", Input{Status: discarding, Pending: PendingMatch}, StepDiscarding, StepConfirming, Discard, ""},
		{"discarding, an abort: refused, stays", Input{Status: discarding, Pending: PendingMatch, AbortRequest: "r1"}, StepDiscarding, "", Refuse, reason.AbortSkipped},
		{"confirming: confirm and go Idle", Input{Status: confirming}, StepConfirming, "", Discard, ""},
		{"rolling back: waits for the consumers", Input{Status: rollingBack}, StepRollingBack, "", Wait, reason.WaitingForRollout},
		{"rolled back, in the grace period: waits", Input{Status: resetting, RolloutDone: true, RolloutDoneAt: now, GracePeriod: time.Minute, Now: now}, StepResetting, "", Wait, ""},
		{"rolled back, grace period over: reset", Input{Status: resetting, RolloutDone: true, RolloutDoneAt: out.Time, GracePeriod: time.Minute, Now: now}, StepResetting, "", Reset, ""},
	}
	for _, c := range cases {
		d := Decide(c.in)
		if d.Step != c.step || d.Then != c.then || d.Action != c.action || d.Reason != c.why {
			t.Errorf("%s: Decide = step %s then %q, %s, reason %q; want step %s then %q, %s, reason %q",
				c.name, d.Step, d.Then, d.Action, d.Reason, c.step, c.then, c.action, c.why)
		}
	}
}
