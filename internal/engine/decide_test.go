package engine

import (
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

func status(phase v1.RotationPhase, id, last string, rotateApplied, discardApplied bool) v1.CredentialSetStatus {
	return v1.CredentialSetStatus{Phase: phase, RotationID: id, LastRotationID: last,
		RotateApplied: rotateApplied, DiscardApplied: discardApplied}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	idle := status(v1.PhaseIdle, "", "old", false, false)
	rotating := status(v1.PhaseRotating, "r1", "old", false, false)
	rotatingApplied := status(v1.PhaseRotating, "r1", "old", true, false)
	distributed := status(v1.PhaseDistributed, "r1", "old", true, false)
	discarded := status(v1.PhaseDistributed, "r1", "old", true, true)
	discardStarted := distributed
	discardStarted.DiscardStarted = true

	cases := []struct {
		name string
		in   Input
		want Decision
	}{
		{"idle, nothing requested", Input{Status: idle}, Decision{Action: None}},
		{"never reconciled phase counts as idle", Input{Status: v1.CredentialSetStatus{}, RotateRequest: "r1"},
			Decision{Action: StartRotation, RotationID: "r1"}},
		{"fresh rotate request starts", Input{Status: idle, RotateRequest: "r1"},
			Decision{Action: StartRotation, RotationID: "r1"}},
		{"stale rotate request (== lastRotationID) is dropped silently", Input{Status: idle, RotateRequest: "old"},
			Decision{Action: DropRotateRequest}},
		{"replicas 0 refuses rotate and keeps the request", Input{Status: idle, RotateRequest: "r1", NoInstances: true},
			Decision{Action: Refuse, Reason: reason.RotateRefused, Requeue: RequeueRollout}},
		{"rotate wins over discard in one reconcile", Input{Status: idle, RotateRequest: "r1", DiscardRequest: "r1"},
			Decision{Action: StartRotation, RotationID: "r1"}},
		{"discard while idle is skipped and consumed", Input{Status: idle, DiscardRequest: "zz"},
			Decision{Action: Refuse, Reason: reason.DiscardSkipped, DropDiscard: true}},
		{"stale discard while idle is dropped silently", Input{Status: idle, DiscardRequest: "old"},
			Decision{Action: DropDiscardRequest}},
		{"idle with pending secrets no rotation accounts for (a user listed again): a recovery of its own", Input{Status: idle, Pending: PendingPartial, Generation: 7, Overlap: true},
			Decision{Action: Recover, RecoverID: "leftover-g7", Reason: reason.RecoveryStarted}},
		{"the leftover's recovery comes before a rotation", Input{Status: idle, Pending: PendingPartial, RotateRequest: "r1", Generation: 7, Overlap: true},
			Decision{Action: Recover, RecoverID: "leftover-g7", Reason: reason.RecoveryStarted}},
		{"a deleted set with a leftover only winds down", Input{Status: idle, Pending: PendingPartial, Deleting: true, Overlap: true},
			Decision{Action: None}},
		{"a leftover on a backend that rotates in place is not reset to the current secret (the backend refuses it already)", Input{Status: idle, Pending: PendingPartial, Generation: 7},
			Decision{Action: None}},

		{"rotating continues without pending yet", Input{Status: rotating, Pending: PendingNone},
			Decision{Action: ContinueRotation}},
		{"rotating continues with matching pending", Input{Status: rotating, Pending: PendingMatch, RotateRequest: "r1"},
			Decision{Action: ContinueRotation}},
		{"rotating with another rotation's pending refuses", Input{Status: rotating, Pending: PendingStale},
			Decision{Action: Refuse, Reason: reason.StaleRotationPending, Requeue: time.Minute}},
		{"rotating with partial pending refuses", Input{Status: rotating, Pending: PendingPartial},
			Decision{Action: Refuse, Reason: reason.MissingRotationPending, Requeue: time.Minute}},
		{"applied rotation that lost its pending refuses", Input{Status: rotatingApplied, Pending: PendingNone},
			Decision{Action: Refuse, Reason: reason.MissingRotationPending, Requeue: time.Minute}},
		{"rotating with replicas 0 refuses", Input{Status: rotating, Pending: PendingMatch, NoInstances: true},
			Decision{Action: Refuse, Reason: reason.RotateRefused, Requeue: RequeueRollout}},
		{"discard request during Rotating waits for phase 1", Input{Status: rotating, Pending: PendingMatch, DiscardRequest: "r1"},
			Decision{Action: ContinueRotation}},

		{"distributed: leftover rotate request dropped silently", Input{Status: distributed, RotateRequest: "r1", Pending: PendingMatch},
			Decision{Action: DropRotateRequest}},
		{"distributed: another rotate request refused and consumed", Input{Status: distributed, RotateRequest: "r2", Pending: PendingMatch},
			Decision{Action: Refuse, Reason: reason.RotateRefused, DropRotate: true}},
		{"distributed, manual, no request: wait for the user", Input{Status: distributed, Pending: PendingMatch, Policy: v1.DiscardManual},
			Decision{Action: None}},
		{"distributed, discard with the wrong ID is skipped", Input{Status: distributed, Pending: PendingMatch, DiscardRequest: "r9"},
			Decision{Action: Refuse, Reason: reason.DiscardSkipped, DropDiscard: true}},
		{"distributed, discard before rollout waits 15s", Input{Status: distributed, Pending: PendingMatch, DiscardRequest: "r1"},
			Decision{Action: Wait, Reason: reason.WaitingForRollout, Requeue: RequeueRollout}},
		{"distributed, discard after rollout discards", Input{Status: distributed, Pending: PendingMatch, DiscardRequest: "r1", RolloutDone: true},
			Decision{Action: Discard}},
		{"distributed, replicas 0 refuses discard", Input{Status: distributed, Pending: PendingMatch, DiscardRequest: "r1", RolloutDone: true, NoInstances: true},
			Decision{Action: Refuse, Reason: reason.DiscardRefused, Requeue: RequeueRollout}},
		{"distributed, pending lost refuses discard", Input{Status: distributed, Pending: PendingNone, DiscardRequest: "r1", RolloutDone: true},
			Decision{Action: Refuse, Reason: reason.MissingRotationPending, Requeue: time.Minute}},
		{"distributed, pending of another rotation refuses discard", Input{Status: distributed, Pending: PendingStale, DiscardRequest: "r1", RolloutDone: true},
			Decision{Action: Refuse, Reason: reason.StaleRotationPending, Requeue: time.Minute}},
		{"distributed, not applied: discard skipped", Input{Status: status(v1.PhaseDistributed, "r1", "", false, false), DiscardRequest: "r1"},
			Decision{Action: Refuse, Reason: reason.DiscardSkipped, DropDiscard: true}},
		{"discard already applied finishes even with pending confirmed", Input{Status: discarded, Pending: PendingNone},
			Decision{Action: Discard, AutoDiscarded: true}},
		{"AfterRollout waits for the rollout", Input{Status: distributed, Pending: PendingMatch, Policy: v1.DiscardAfterRollout, Consumers: 1},
			Decision{Action: Wait, Reason: reason.WaitingForRollout, Requeue: RequeueRollout}},
		{"AfterRollout waits out the grace period", Input{Status: distributed, Pending: PendingMatch, Policy: v1.DiscardAfterRollout, Consumers: 1,
			RolloutDone: true, RolloutDoneAt: now.Add(-time.Minute), GracePeriod: 5 * time.Minute, Now: now},
			Decision{Action: Wait, Requeue: 4 * time.Minute, Until: now.Add(4 * time.Minute)}},
		{"AfterRollout discards after the grace period", Input{Status: distributed, Pending: PendingMatch, Policy: v1.DiscardAfterRollout, Consumers: 1,
			RolloutDone: true, RolloutDoneAt: now.Add(-6 * time.Minute), GracePeriod: 5 * time.Minute, Now: now},
			Decision{Action: Discard, AutoDiscarded: true}},
		{"AfterRollout: an explicit discard skips the grace period", Input{Status: distributed, Pending: PendingMatch, Policy: v1.DiscardAfterRollout,
			RolloutDone: true, RolloutDoneAt: now, GracePeriod: 5 * time.Minute, Now: now, DiscardRequest: "r1"},
			Decision{Action: Discard}},

		{"AfterRollout without a declared consumer does not retire by itself", Input{Status: distributed, Pending: PendingMatch, Policy: v1.DiscardAfterRollout,
			RolloutDone: true, RolloutDoneAt: now.Add(-6 * time.Minute), GracePeriod: 5 * time.Minute, Now: now},
			Decision{Action: Refuse, Reason: reason.AutoDiscardHeld, Requeue: RequeueRollout}},
		{"AfterRollout without a declared consumer: a discard request still discards", Input{Status: distributed, Pending: PendingMatch, Policy: v1.DiscardAfterRollout,
			RolloutDone: true, RolloutDoneAt: now, Now: now, DiscardRequest: "r1"},
			Decision{Action: Discard}},
		{"a discard that began finishes without a request", Input{Status: discardStarted, Pending: PendingMatch},
			Decision{Action: Discard, AutoDiscarded: true}},
		{"a discard that began finishes without waiting for the rollout", Input{Status: discardStarted, Pending: PendingMatch, Policy: v1.DiscardAfterRollout, Consumers: 1},
			Decision{Action: Discard, AutoDiscarded: true}},
		{"a discard that began, replicas 0: refused until scaled up", Input{Status: discardStarted, Pending: PendingMatch, NoInstances: true},
			Decision{Action: Refuse, Reason: reason.DiscardRefused, Requeue: RequeueRollout}},
		{"a discard that began, pending lost: refused", Input{Status: discardStarted, Pending: PendingNone},
			Decision{Action: Refuse, Reason: reason.MissingRotationPending, Requeue: time.Minute}},
		{"abort after discard began is refused", Input{Status: discardStarted, Pending: PendingMatch, AbortRequest: "r1"},
			Decision{Action: Refuse, Reason: reason.AbortSkipped, DropAbort: true}},
		{"recover after discard began is refused", Input{Status: discardStarted, Pending: PendingMatch, RecoverRequest: "x1"},
			Decision{Action: Refuse, Reason: reason.AbortSkipped}},
		{"abort while Distributed rolls back", Input{Status: distributed, Pending: PendingMatch, AbortRequest: "r1", DiscardRequest: "r1", RolloutDone: true},
			Decision{Action: Rollback}},
		{"abort while Rotating rolls back", Input{Status: rotating, AbortRequest: "r1"}, Decision{Action: Rollback}},
		{"abort after discard was applied is refused", Input{Status: discarded, AbortRequest: "r1"},
			Decision{Action: Refuse, Reason: reason.AbortSkipped, DropAbort: true}},
		{"abort of another rotation is refused", Input{Status: distributed, Pending: PendingMatch, AbortRequest: "r9"},
			Decision{Action: Refuse, Reason: reason.AbortSkipped, DropAbort: true}},
		{"a served abort left behind is dropped silently", Input{Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, LastRolledBackID: "r1"}, AbortRequest: "r1"},
			Decision{Action: DropAbortRequest}},
		{"abort while idle is refused", Input{Status: idle, AbortRequest: "r1"},
			Decision{Action: Refuse, Reason: reason.AbortSkipped, DropAbort: true}},
		{"recover with a stale pending rolls back", Input{Status: rotating, Pending: PendingStale, RecoverRequest: "x1"},
			Decision{Action: Rollback, RecoverID: "x1"}},
		{"recover with pending lost rolls back", Input{Status: distributed, Pending: PendingNone, RecoverRequest: "x1"},
			Decision{Action: Rollback, RecoverID: "x1"}},
		{"recover while idle resets the backend", Input{Status: idle, RecoverRequest: "x1"},
			Decision{Action: Recover, RecoverID: "x1"}},
		{"recover while idle waits while an in-place backend refuses the current secrets", Input{Status: idle, RecoverRequest: "x1", CurrentRefused: "changed outside rekey"},
			Decision{Action: Refuse, Reason: reason.KeyMismatch}},
		{"a served recover request is ignored", Input{Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, LastRecoverID: "x1"}, RecoverRequest: "x1"},
			Decision{Action: None}},
		{"the request of a rolled-back rotation does not start it again", Input{Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, LastRolledBackID: "r1"}, RotateRequest: "r1"},
			Decision{Action: DropRotateRequest}},
		{"reset waits for consumers to roll back", Input{Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true}, RotateRequest: "r2"},
			Decision{Action: Wait, Reason: reason.WaitingForRollout, Requeue: RequeueRollout}},
		{"reset waits out the grace period after the rollback rolled out", Input{Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true},
			RolloutDone: true, RolloutDoneAt: now.Add(-time.Second), GracePeriod: 5 * time.Second, Now: now},
			Decision{Action: Wait, Requeue: 4 * time.Second, Until: now.Add(4 * time.Second)}},
		{"policy starts a rotation when idle", Input{Status: idle, PolicyRotation: "keygeneration-3"},
			Decision{Action: StartRotation, RotationID: "keygeneration-3", ByPolicy: true}},
		{"a rotate request wins over the policy", Input{Status: idle, PolicyRotation: "keygeneration-3", RotateRequest: "r1"},
			Decision{Action: StartRotation, RotationID: "r1"}},
		{"policy with replicas 0 refuses", Input{Status: idle, PolicyRotation: "keygeneration-3", NoInstances: true},
			Decision{Action: Refuse, Reason: reason.RotateRefused, Requeue: RequeueRollout}},
		{"policy waits for a reset to finish", Input{Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true}, PolicyRotation: "keygeneration-3"},
			Decision{Action: Wait, Reason: reason.WaitingForRollout, Requeue: RequeueRollout}},
		{"policy does not interrupt Distributed", Input{Status: distributed, Pending: PendingMatch, PolicyRotation: "keygeneration-3"},
			Decision{Action: None}},
		{"in-place rotation that applied cannot be aborted", Input{Status: distributed, Pending: PendingMatch, AbortRequest: "r1", Irreversible: true},
			Decision{Action: Refuse, Reason: reason.AbortSkipped, DropAbort: true}},
		{"in-place rotation that applied cannot be recovered by rollback", Input{Status: rotatingApplied, Pending: PendingMatch, RecoverRequest: "x1", Irreversible: true},
			Decision{Action: Refuse, Reason: reason.AbortSkipped}},
		{"in-place rotation not yet applied can be aborted", Input{Status: rotating, AbortRequest: "r1"}, Decision{Action: Rollback}},
		{"reset before a waiting rotation starts", Input{Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true}, RotateRequest: "r2", RolloutDone: true, AbortRequest: "r1"},
			Decision{Action: Reset}},

		// A deleted set winds down: what is in flight completes, nothing starts.
		{"deleting: a rotate request starts nothing", Input{Status: idle, RotateRequest: "r1", Deleting: true}, Decision{Action: None}},
		{"deleting: the policy starts nothing", Input{Status: idle, PolicyRotation: "keygeneration-3", Deleting: true}, Decision{Action: None}},
		{"deleting: a rotation in flight continues", Input{Status: rotating, Pending: PendingMatch, Deleting: true}, Decision{Action: ContinueRotation}},
		{"deleting: a rolled-out rotation is discarded", Input{Status: distributed, Pending: PendingMatch, Policy: v1.DiscardAfterRollout, Consumers: 1, RolloutDone: true, RolloutDoneAt: now.Add(-time.Hour), Now: now, Deleting: true},
			Decision{Action: Discard, AutoDiscarded: true}},
		{"a leftover's recovery, once started, waits for the consumers like any reset", Input{Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true}, Pending: PendingPartial, Generation: 8},
			Decision{Action: Wait, Reason: reason.WaitingForRollout, Requeue: RequeueRollout}},
		{"deleting: a reset finishes", Input{Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true}, RolloutDone: true, Deleting: true}, Decision{Action: Reset}},
		{"deleting: an abort is still served", Input{Status: distributed, Pending: PendingMatch, AbortRequest: "r1", Deleting: true}, Decision{Action: Rollback}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.in)
			got.Message = ""            // messages are checked below, not here
			got.Step, got.Then = "", "" // steps are checked by TestNextStep
			if got != c.want {
				t.Fatalf("Decide = %+v\nwant      %+v", got, c.want)
			}
		})
	}
}

// Every refusal must tell the user what to do next.
func TestRefusalsNameTheNextStep(t *testing.T) {
	inputs := []Input{
		{Status: status(v1.PhaseIdle, "", "", false, false), RotateRequest: "r", NoInstances: true},
		{Status: status(v1.PhaseIdle, "", "", false, false), DiscardRequest: "r"},
		{Status: status(v1.PhaseRotating, "r", "", false, false), Pending: PendingStale},
		{Status: status(v1.PhaseRotating, "r", "", false, false), Pending: PendingPartial},
		{Status: status(v1.PhaseDistributed, "r", "", true, false), RotateRequest: "x"},
		{Status: status(v1.PhaseDistributed, "r", "", true, false), DiscardRequest: "x"},
		{Status: status(v1.PhaseDistributed, "r", "", true, false), DiscardRequest: "r", Pending: PendingNone},
		{Status: status(v1.PhaseDistributed, "r", "", true, false), DiscardRequest: "r", Pending: PendingMatch, NoInstances: true},
		{Status: status(v1.PhaseDistributed, "r", "", true, false), Pending: PendingMatch, Policy: v1.DiscardAfterRollout, RolloutDone: true},
		{Status: v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r", RotateApplied: true, DiscardStarted: true}, AbortRequest: "r"},
		{Status: v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r", RotateApplied: true, DiscardStarted: true}, Pending: PendingNone},
	}
	for _, in := range inputs {
		d := Decide(in)
		if d.Action != Refuse || d.Reason == "" || len(d.Message) < 40 {
			t.Errorf("input %+v: decision %+v lacks a refusal with a message", in, d)
		}
	}
}

func TestRestartValueIsStableAcrossCompletion(t *testing.T) {
	cases := []struct {
		st   v1.CredentialSetStatus
		want string
	}{
		{status(v1.PhaseIdle, "", "", false, false), ""},
		{status(v1.PhaseRotating, "abc", "", false, false), ""},
		{status(v1.PhaseDistributed, "abc", "", true, false), "abc"},
		{status(v1.PhaseIdle, "", "abc", false, false), "abc"},
		{status(v1.PhaseRotating, "def", "abc", true, false), "abc"},
		{status(v1.PhaseDistributed, "def", "abc", true, false), "def"},
		// restartID, once recorded, is the value, whatever the phase.
		{v1.CredentialSetStatus{Phase: v1.PhaseIdle, RestartID: RollbackRestartID("abc", "7")}, "rollback-abc-7"},
		{v1.CredentialSetStatus{Phase: v1.PhaseIdle, LastRotationID: "abc", RestartID: "abc"}, "abc"},
		{v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "def", LastRotationID: "abc", RestartID: "abc"}, "abc"},
	}
	for _, c := range cases {
		if got := RestartValue(c.st); got != c.want {
			t.Errorf("RestartValue(%+v) = %q, want %q", c.st, got, c.want)
		}
	}
}

func TestDistribution(t *testing.T) {
	cases := []struct {
		st                     v1.CredentialSetStatus
		pending                PendingState
		wantPending, wantWrite bool
	}{
		{status(v1.PhaseIdle, "", "", false, false), PendingNone, false, true},
		{status(v1.PhaseRotating, "r", "", false, false), PendingMatch, true, false},
		{status(v1.PhaseRotating, "r", "", true, false), PendingMatch, true, true},
		{status(v1.PhaseDistributed, "r", "", true, false), PendingMatch, true, true},
		{status(v1.PhaseDistributed, "r", "", true, false), PendingNone, true, false},
		{status(v1.PhaseDistributed, "r", "", true, true), PendingNone, false, true},
	}
	for _, c := range cases {
		p, w := Distribution(c.st, c.pending)
		if p != c.wantPending || w != c.wantWrite {
			t.Errorf("Distribution(%+v, %v) = %v,%v want %v,%v", c.st, c.pending, p, w, c.wantPending, c.wantWrite)
		}
	}
}
