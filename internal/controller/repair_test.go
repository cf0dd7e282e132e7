package controller

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

func TestUpkeepOf(t *testing.T) {
	idle := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2}
	recovering := idle
	recovering.ResetPending = true
	dist := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, KeyGeneration: 2, RotateApplied: true}
	started := dist
	started.DiscardStarted = true
	applied := started
	applied.DiscardApplied = true
	rotating := v1.CredentialSetStatus{Phase: v1.PhaseRotating, KeyGeneration: 2}
	rotatingApplied := rotating
	rotatingApplied.RotateApplied = true
	for _, tc := range []struct {
		name    string
		st      v1.CredentialSetStatus
		pending engine.PendingState
		want    upkeep
	}{
		{"Idle: an instance back from a scale-in", idle, engine.PendingNone, upkeepIdle},
		{"not provisioned", v1.CredentialSetStatus{Phase: v1.PhaseIdle}, engine.PendingNone, upkeepNone},
		{"Idle, pending secrets of another rotation left in the source Secret", idle, engine.PendingStale, upkeepNone},
		{"Idle, some pending secrets only", idle, engine.PendingPartial, upkeepNone},
		{"a recovery's reset owed: consumers restart onto the current secrets", recovering, engine.PendingNone, upkeepIdle},
		{"a rollback's reset owed: the rotation's secrets stay valid until it", recovering, engine.PendingStale, upkeepPending},
		{"a reset owed, some pending secrets only", recovering, engine.PendingPartial, upkeepNone},
		{"Distributed: both passwords must be valid everywhere", dist, engine.PendingMatch, upkeepPending},
		{"Distributed, pending missing", dist, engine.PendingNone, upkeepNone},
		{"Distributed, pending of another rotation: never applied", dist, engine.PendingStale, upkeepNone},
		{"discard started: Retire repairs, with pending only", started, engine.PendingMatch, upkeepNone},
		{"discard applied", applied, engine.PendingMatch, upkeepNone},
		{"Rotating, nothing stored yet: nothing of it applied anywhere", rotating, engine.PendingNone, upkeepIdle},
		{"Rotating, pending stored: Apply's work, which an abort may pre-empt", rotating, engine.PendingMatch, upkeepPending},
		{"Rotating, phase 1 recorded: an instance rebuilt since would refuse Verify", rotatingApplied, engine.PendingMatch, upkeepPending},
		{"Rotating, phase 1 recorded, pending missing", rotatingApplied, engine.PendingNone, upkeepNone},
	} {
		if got := upkeepOf(tc.st, tc.pending, false); got != tc.want {
			t.Errorf("%s: upkeepOf = %d, want %d", tc.name, got, tc.want)
		}
	}
	// Scaled to 0: nothing can refuse anyone, and nobody asked.
	for _, st := range []v1.CredentialSetStatus{idle, recovering, dist} {
		if got := upkeepOf(st, engine.PendingMatch, true); got != upkeepNone {
			t.Errorf("upkeepOf(%+v) with no instances = %d: a repair would only report that there are none", st, got)
		}
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
