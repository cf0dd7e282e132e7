package engine

import (
	"slices"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Addition is what a reconcile of a provisioned set does with the keys its
// spec lists and its source Secret has no current secret for.
type Addition int

const (
	// AddNow: provision them now (store, make every instance accept,
	// make current), without a new generation.
	AddNow Addition = iota
	// AddLost: no current secret at all: the source Secret lost them,
	// which only a restore from backup brings back.
	AddLost
	// AddInFlight: a rotation or a rollback is under way; its secrets and
	// its backend calls cover the keys it began with, so an identity is
	// added only once it ended.
	AddInFlight
	// AddUnsupported: the backend provisions identities only when the
	// set is first provisioned (Traits.AddsAtRest).
	AddUnsupported
	// AddReadBack: the backend hands its secrets back (Traits.ReadBack),
	// so nothing is lost: Provision reads back the keys it holds (or mints
	// those that exist nowhere), they become current, and the consumers
	// restart onto them (the key a person deleted from the source Secret
	// so that rekey adopts the backend's, as a KeyMismatch refusal says).
	AddReadBack
)

func (a Addition) String() string {
	return [...]string{"AddNow", "AddLost", "AddInFlight", "AddUnsupported", "AddReadBack"}[a]
}

// DecideAdd decides for a provisioned set in st whose source Secret holds
// held current secrets (of any key, listed or not: CurrentCount), and
// whose listed keys that have one are in pending state pending. A source
// Secret that holds none was lost (or emptied); otherwise a key without
// one is an identity new to the spec (a user added, or one listed in
// place of another). It is added only while the set is at rest (Idle, no
// reset owed, nothing pending), as Provision's contract is for a set with
// nothing in flight. A backend that hands its keys back (ReadBack) loses
// none: at rest, whatever the source Secret lacks is read back from it.
func DecideAdd(st v1.CredentialSetStatus, pending PendingState, traits Traits, held int) Addition {
	atRest := st.Phase == v1.PhaseIdle && !st.ResetPending && !st.DiscardStarted && pending == PendingNone
	// A reset owed ends with the backend holding the current secrets
	// (only those, for an overlapping one): a read back makes what the
	// backend holds current first, so it is how a reset the backend
	// refuses (its key changed since) ends, and the reset then keeps it.
	// For an in-place backend (no Overlap) pending secrets with no
	// rotation in flight (a status restored from a backup, a write of a
	// manager whose cache lagged) are a key the backend holds or a dead
	// one: reading its keys back takes nothing from either. An overlapping
	// backend's pending secrets may be valid beside the current ones.
	readBackAtRest := st.Phase == v1.PhaseIdle && !st.DiscardStarted && (pending == PendingNone || !traits.Overlap)
	switch {
	case traits.ReadBack && readBackAtRest:
		return AddReadBack
	case held == 0:
		return AddLost
	case !traits.AddsAtRest:
		return AddUnsupported
	case !atRest:
		return AddInFlight
	}
	return AddNow
}

// OutsideRotation lists the keys of listed (keys the spec lists that hold
// a current secret) that the rotation or rollback in flight in st did not
// begin with: a user removed from the spec before it started and listed
// again since. It holds no new secret, and none is owed: such a key keeps
// its current secret, is served and repaired with it, and takes no part
// in the rotation's steps. None when nothing is in flight, or when st
// does not record the keys (a rotation started by an earlier rekey): every
// listed key then counts as the rotation's, and one without a new secret
// stops it, as a new secret deleted by hand must.
func OutsideRotation(st v1.CredentialSetStatus, listed []string) []string {
	if !RotationInFlight(st) || len(st.RotationKeys) == 0 {
		return nil
	}
	var out []string
	for _, k := range listed {
		if !slices.Contains(st.RotationKeys, k) {
			out = append(out, k)
		}
	}
	return out
}

// InRotation is listed without the keys OutsideRotation names: the keys
// whose new secrets the rotation or rollback in flight in st covers.
func InRotation(st v1.CredentialSetStatus, listed []string) []string {
	out := OutsideRotation(st, listed)
	return slices.DeleteFunc(slices.Clone(listed), func(k string) bool { return slices.Contains(out, k) })
}
