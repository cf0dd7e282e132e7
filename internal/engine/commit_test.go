package engine

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestCommitment(t *testing.T) {
	active := func(phase v1.RotationPhase, f func(*v1.CredentialSetStatus)) v1.CredentialSetStatus {
		st := v1.CredentialSetStatus{Phase: phase, RotationID: "r1", RotateApplied: phase == v1.PhaseDistributed}
		if f != nil {
			f(&st)
		}
		return st
	}
	cases := []struct {
		name         string
		st           v1.CredentialSetStatus
		irreversible bool
		want         Commitment
		text         string
	}{
		{"rotating, nothing applied", active(v1.PhaseRotating, nil), false, Reversible, ""},
		{"distributed, old secrets still valid", active(v1.PhaseDistributed, nil), false, Reversible, ""},
		{"applied in place", active(v1.PhaseRotating, nil), true, ReplacedInPlace,
			"rotation r1 replaced the secrets in place, so the old ones no longer exist"},
		{"discard started", active(v1.PhaseDistributed, func(s *v1.CredentialSetStatus) { s.DiscardStarted = true }), false, Retiring,
			"rotation r1 began discarding the old secrets, so some instances may refuse them already"},
		{"discard applied wins over started", active(v1.PhaseDistributed, func(s *v1.CredentialSetStatus) { s.DiscardStarted, s.DiscardApplied = true, true }), true, Retired,
			"rotation r1 already discarded the old secrets everywhere"},
		{"discard started wins over in place", active(v1.PhaseDistributed, func(s *v1.CredentialSetStatus) { s.DiscardStarted = true }), true, Retiring,
			"rotation r1 began discarding the old secrets, so some instances may refuse them already"},
	}
	for _, c := range cases {
		if got := CommitmentOf(c.st, c.irreversible); got != c.want {
			t.Errorf("%s: CommitmentOf = %d, want %d", c.name, got, c.want)
		}
		committed, text := Committed(c.st, c.irreversible)
		if committed != (c.want != Reversible) || text != c.text {
			t.Errorf("%s: Committed = %v, %q; want %v, %q", c.name, committed, text, c.want != Reversible, c.text)
		}
	}
}

func TestAppliedInPlace(t *testing.T) {
	inPlace, overlap := Traits{ReadBack: true}, Traits{ReadBack: true, Overlap: true}
	cases := []struct {
		name  string
		phase v1.RotationPhase
		apply bool
		t     Traits
		want  bool
	}{
		{"in place, applied, rotating", v1.PhaseRotating, true, inPlace, true},
		{"in place, applied, distributed", v1.PhaseDistributed, true, inPlace, true},
		{"in place, not applied yet", v1.PhaseRotating, false, inPlace, false},
		{"overlapping backend keeps the old secrets", v1.PhaseDistributed, true, overlap, false},
		{"idle: no active rotation", v1.PhaseIdle, true, inPlace, false},
		{"never phased: no active rotation", "", true, inPlace, false},
	}
	for _, c := range cases {
		st := v1.CredentialSetStatus{Phase: c.phase, RotationID: "r1", RotateApplied: c.apply}
		if got := AppliedInPlace(st, c.t); got != c.want {
			t.Errorf("%s: AppliedInPlace = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestActive(t *testing.T) {
	for phase, want := range map[v1.RotationPhase]bool{"": false, v1.PhaseIdle: false, v1.PhaseRotating: true, v1.PhaseDistributed: true} {
		if got := Active(v1.CredentialSetStatus{Phase: phase}); got != want {
			t.Errorf("Active(phase %q) = %v, want %v", phase, got, want)
		}
	}
}
