package controller

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

func TestRepairDue(t *testing.T) {
	dist := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotateApplied: true}
	started := dist
	started.DiscardStarted = true
	applied := started
	applied.DiscardApplied = true
	rotating := v1.CredentialSetStatus{Phase: v1.PhaseRotating}
	rotatingApplied := v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotateApplied: true}
	for _, tc := range []struct {
		name    string
		st      v1.CredentialSetStatus
		pending engine.PendingState
		want    bool
	}{
		{"Distributed: both passwords must be valid everywhere", dist, engine.PendingMatch, true},
		{"discard started: Retire repairs, with pending only", started, engine.PendingMatch, false},
		{"discard applied", applied, engine.PendingMatch, false},
		{"Rotating: Apply does it", rotating, engine.PendingMatch, false},
		{"Rotating, phase 1 recorded: an instance rebuilt since would refuse Verify", rotatingApplied, engine.PendingMatch, true},
		{"Idle", v1.CredentialSetStatus{Phase: v1.PhaseIdle}, engine.PendingNone, false},
		{"pending of another rotation: never applied", dist, engine.PendingStale, false},
		{"pending missing", dist, engine.PendingNone, false},
	} {
		if got := repairDue(tc.st, tc.pending, false); got != tc.want {
			t.Errorf("%s: repairDue = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Scaled to 0: nothing can refuse anyone, and nobody asked.
	if repairDue(dist, engine.PendingMatch, true) {
		t.Error("repairDue with no instances: a repair would only report that there are none")
	}
}

func TestStartsDiscard(t *testing.T) {
	dist := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotateApplied: true}
	started := dist
	started.DiscardStarted = true
	applied := started
	applied.DiscardApplied = true
	discard := engine.Decision{Action: engine.Discard}
	for _, tc := range []struct {
		name string
		d    engine.Decision
		st   v1.CredentialSetStatus
		want bool
	}{
		{"a discard about to begin: held while repair fails", discard, dist, true},
		{"a discard that began: only finishing it helps", discard, started, false},
		{"a discard applied: only confirmation remains", discard, applied, false},
		{"a rollback: what a failed repair may call for", engine.Decision{Action: engine.Rollback}, dist, false},
		{"waiting for the rollout", engine.Decision{Action: engine.Wait}, dist, false},
	} {
		if got := startsDiscard(tc.d, tc.st); got != tc.want {
			t.Errorf("%s: startsDiscard = %v, want %v", tc.name, got, tc.want)
		}
	}
}
