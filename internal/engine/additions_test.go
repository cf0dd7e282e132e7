package engine

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestDecideAdd(t *testing.T) {
	idle := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3}
	adds := Traits{Overlap: true, AddsAtRest: true}
	with := func(f func(*v1.CredentialSetStatus)) v1.CredentialSetStatus {
		st := idle
		f(&st)
		return st
	}
	for _, c := range []struct {
		name           string
		st             v1.CredentialSetStatus
		pending        PendingState
		traits         Traits
		missing, total int
		want           Addition
	}{
		{"a user added to a set at rest", idle, PendingNone, adds, 1, 3, AddNow},
		{"every key gone: the source Secret was lost", idle, PendingNone, adds, 3, 3, AddLost},
		{"every key gone, whatever the backend", idle, PendingNone, Traits{}, 2, 2, AddLost},
		{"a backend that provisions only once", idle, PendingNone, Traits{Overlap: true}, 1, 3, AddUnsupported},
		{"mid-rotation", with(func(s *v1.CredentialSetStatus) { s.Phase = v1.PhaseRotating }), PendingMatch, adds, 1, 3, AddInFlight},
		{"distributed", with(func(s *v1.CredentialSetStatus) { s.Phase = v1.PhaseDistributed }), PendingMatch, adds, 1, 3, AddInFlight},
		{"a reset owed after a rollback", with(func(s *v1.CredentialSetStatus) { s.ResetPending = true }), PendingNone, adds, 1, 3, AddInFlight},
		{"a discard under way", with(func(s *v1.CredentialSetStatus) { s.DiscardStarted = true }), PendingNone, adds, 1, 3, AddInFlight},
		{"Idle with a rotation's secrets left", idle, PendingPartial, adds, 1, 3, AddInFlight},
		{"Idle with another rotation's secrets", idle, PendingStale, adds, 1, 3, AddInFlight},
	} {
		if got := DecideAdd(c.st, c.pending, c.traits, c.missing, c.total); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
