package engine

import (
	"slices"
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
		name    string
		st      v1.CredentialSetStatus
		pending PendingState
		traits  Traits
		held    int
		want    Addition
	}{
		{"a user added to a set at rest", idle, PendingNone, adds, 2, AddNow},
		{"a user listed in place of the only other: the source still holds that one's", idle, PendingNone, adds, 1, AddNow},
		{"no current secret at all: the source Secret was lost or emptied", idle, PendingNone, adds, 0, AddLost},
		{"lost, whatever the backend", idle, PendingNone, Traits{}, 0, AddLost},
		{"a backend that provisions only once", idle, PendingNone, Traits{Overlap: true}, 2, AddUnsupported},
		{"mid-rotation", with(func(s *v1.CredentialSetStatus) { s.Phase = v1.PhaseRotating }), PendingMatch, adds, 2, AddInFlight},
		{"distributed", with(func(s *v1.CredentialSetStatus) { s.Phase = v1.PhaseDistributed }), PendingMatch, adds, 2, AddInFlight},
		{"a reset owed after a rollback", with(func(s *v1.CredentialSetStatus) { s.ResetPending = true }), PendingNone, adds, 2, AddInFlight},
		{"a discard under way", with(func(s *v1.CredentialSetStatus) { s.DiscardStarted = true }), PendingNone, adds, 2, AddInFlight},
		{"Idle with a rotation's secrets left", idle, PendingPartial, adds, 2, AddInFlight},
		{"Idle with another rotation's secrets", idle, PendingStale, adds, 2, AddInFlight},
		{"a backend that hands its keys back: a key deleted from the source Secret", idle, PendingNone, Traits{ReadBack: true}, 1, AddReadBack},
		{"a backend that hands its keys back: every key deleted", idle, PendingNone, Traits{ReadBack: true}, 0, AddReadBack},
		{"hands its keys back, mid-rotation", with(func(s *v1.CredentialSetStatus) { s.Phase = v1.PhaseRotating }), PendingNone, Traits{ReadBack: true}, 1, AddUnsupported},
		{"hands its keys back, all lost mid-rotation", with(func(s *v1.CredentialSetStatus) { s.Phase = v1.PhaseRotating }), PendingNone, Traits{ReadBack: true}, 0, AddLost},
		{"hands its keys back, overlapping, a recover's reset owed: read back first, the reset keeps it", with(func(s *v1.CredentialSetStatus) { s.ResetPending = true }), PendingNone, Traits{ReadBack: true, Overlap: true}, 1, AddReadBack},
		{"hands its keys back, overlapping, a rollback's reset owed (the rotation's secrets kept until then)", with(func(s *v1.CredentialSetStatus) { s.ResetPending = true }), PendingStale, Traits{ReadBack: true, Overlap: true}, 1, AddUnsupported},
		{"hands its keys back, in place, a reset owed", with(func(s *v1.CredentialSetStatus) { s.ResetPending = true }), PendingNone, Traits{ReadBack: true}, 1, AddReadBack},
		{"hands its keys back, a discard under way", with(func(s *v1.CredentialSetStatus) { s.DiscardStarted = true }), PendingNone, Traits{ReadBack: true}, 1, AddUnsupported},
		{"hands its keys back, in place, Idle with a rotation's secrets left", idle, PendingStale, Traits{ReadBack: true}, 1, AddReadBack},
		{"hands its keys back, overlapping, Idle with a rotation's secrets left", idle, PendingStale, Traits{ReadBack: true, Overlap: true}, 1, AddUnsupported},
	} {
		if got := DecideAdd(c.st, c.pending, c.traits, c.held); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// CurrentCount counts current secrets only: not a rotation's, nor one
// staged for an identity being added, nor ROTATION_ID.
func TestCurrentCount(t *testing.T) {
	data := map[string][]byte{
		"APP_PASSWORD": []byte("a"), "OLD_PASSWORD": []byte("o"), "EMPTY_PASSWORD": nil,
		PendingKey("APP_PASSWORD"): []byte("p"), AddingKey("APP2_PASSWORD"): []byte("s"), RotationIDKey: []byte("r1"),
	}
	if n := CurrentCount(data); n != 2 {
		t.Fatalf("CurrentCount = %d, want 2 (APP and OLD)", n)
	}
	if n := CurrentCount(WithoutPending(map[string][]byte{AddingKey("X_PASSWORD"): []byte("s")}, nil)); n != 0 {
		t.Fatalf("CurrentCount of a Secret holding only a staged secret = %d, want 0", n)
	}
}

func TestOutsideRotation(t *testing.T) {
	listed := []string{"ADMIN_PASSWORD", "APP_PASSWORD", "APP2_PASSWORD"}
	began := []string{"ADMIN_PASSWORD", "APP2_PASSWORD"}
	for _, c := range []struct {
		name string
		st   v1.CredentialSetStatus
		want []string
	}{
		{"idle: nothing in flight", v1.CredentialSetStatus{Phase: v1.PhaseIdle, RotationKeys: began}, nil},
		{"rotating: a key listed since", v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r1", RotationKeys: began}, []string{"APP_PASSWORD"}},
		{"distributed: a key listed since", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r1", RotationKeys: began}, []string{"APP_PASSWORD"}},
		{"reset owed after a rollback", v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true, RotationKeys: began}, []string{"APP_PASSWORD"}},
		{"every listed key began with it", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r1", RotationKeys: listed}, nil},
		{"a key it began with, no longer listed", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r1", RotationKeys: append(slices.Clone(listed), "OLD_PASSWORD")}, nil},
		{"keys not recorded (an earlier rekey): all count", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r1"}, nil},
	} {
		if got := OutsideRotation(c.st, listed); !slices.Equal(got, c.want) {
			t.Errorf("%s: OutsideRotation = %v, want %v", c.name, got, c.want)
		}
		in := InRotation(c.st, listed)
		if len(in)+len(c.want) != len(listed) || slices.ContainsFunc(in, func(k string) bool { return slices.Contains(c.want, k) }) {
			t.Errorf("%s: InRotation = %v, not the listed keys %v but %v", c.name, in, listed, c.want)
		}
	}
}
