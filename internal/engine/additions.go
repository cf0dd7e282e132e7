package engine

import v1 "rekey.io/rekey/api/v1alpha1"

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
)

func (a Addition) String() string {
	return [...]string{"AddNow", "AddLost", "AddInFlight", "AddUnsupported"}[a]
}

// DecideAdd decides for a provisioned set in st whose source Secret holds
// held current secrets (of any key, listed or not: CurrentCount), and
// whose listed keys that have one are in pending state pending. A source
// Secret that holds none was lost (or emptied); otherwise a key without
// one is an identity new to the spec (a user added, or one listed in
// place of another). It is added only while the set is at rest (Idle, no
// reset owed, nothing pending), as Provision's contract is for a set with
// nothing in flight.
func DecideAdd(st v1.CredentialSetStatus, pending PendingState, traits Traits, held int) Addition {
	switch {
	case held == 0:
		return AddLost
	case !traits.AddsAtRest:
		return AddUnsupported
	case st.Phase != v1.PhaseIdle || st.ResetPending || st.DiscardStarted || pending != PendingNone:
		return AddInFlight
	}
	return AddNow
}
