package controller

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

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
