package engine

import (
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Active: a rotation is under way (Rotating or Distributed).
func Active(st v1.CredentialSetStatus) bool {
	return st.Phase == v1.PhaseRotating || st.Phase == v1.PhaseDistributed
}

// Commitment says whether the active rotation can still be rolled back,
// and if not, why: each value is a different reason the old secrets are
// (or may be) refused somewhere already.
type Commitment int

const (
	// Reversible: the old secrets are still valid everywhere.
	Reversible Commitment = iota
	// Retired: discarding finished, the old secrets are refused everywhere.
	Retired
	// Retiring: discarding began, some instances may refuse them already.
	Retiring
	// ReplacedInPlace: a backend without Overlap applied (or may have
	// applied) the rotation, so the old secrets no longer exist.
	ReplacedInPlace
)

// CommitmentOf is why the active rotation can only complete, if it can
// only complete. irreversible is Input.Irreversible.
func CommitmentOf(st v1.CredentialSetStatus, irreversible bool) Commitment {
	switch {
	case st.DiscardApplied:
		return Retired
	case st.DiscardStarted:
		return Retiring
	case irreversible:
		return ReplacedInPlace
	}
	return Reversible
}

// Committed: the active rotation can only complete, because old secrets
// are (or may be) refused somewhere already; the text says why.
func Committed(st v1.CredentialSetStatus, irreversible bool) (bool, string) {
	switch CommitmentOf(st, irreversible) {
	case Retired:
		return true, fmt.Sprintf("rotation %s already discarded the old secrets everywhere", st.RotationID)
	case Retiring:
		return true, fmt.Sprintf("rotation %s began discarding the old secrets, so some instances may refuse them already", st.RotationID)
	case ReplacedInPlace:
		return true, fmt.Sprintf("rotation %s replaced the secrets in place, so the old ones no longer exist", st.RotationID)
	}
	return false, ""
}

// AppliedInPlace: status records that a backend without Overlap applied
// the active rotation, so the current secrets no longer exist. It is the
// part of Input.Irreversible that status alone shows; the controller also
// learns it from the source Secret and the backend (a crash may come
// between Apply and the status write), which a reader of status cannot.
func AppliedInPlace(st v1.CredentialSetStatus, t Traits) bool {
	return !t.Overlap && Active(st) && st.RotateApplied
}
