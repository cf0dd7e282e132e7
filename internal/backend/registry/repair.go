package registry

import (
	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// Repair is a backend's own refusal of rotations that kubectl rekey
// recover repairs as it does the shared ones: a rotation in flight rolls
// back, an idle set's backend is reset to the current secrets. The reason
// itself is listed in internal/reason with every other.
type Repair struct {
	Reason reason.Reason
	// Cause is what the reason means, in recover's diagnosis ("a MySQL
	// user has a secondary password that rekey did not set, so rotations
	// are refused").
	Cause string
	// Help is its row in recover's help: what is wrong, a colon, what
	// the reset does, wrapped to lines of up to 48 columns.
	Help string
	// Held, when set, says what the reason holds up in a deleted set's
	// wind-down ("a second password the status does not account for is
	// still valid"), and LetGo what deletionPolicy Retain leaves behind.
	Held, LetGo string
}

// RepairFor is the repair some registered backend gives reason r. It is
// looked up by reason alone: a condition names its reason, and a set may
// have lost its backend block since.
func RepairFor(r reason.Reason) (Repair, bool) {
	for _, e := range Entries() {
		for _, rp := range e.Describe.Repairs {
			if rp.Reason == r {
				return rp, true
			}
		}
	}
	return Repair{}, false
}

// RepairOf is the repair of reason r for set cs: its own backend's, when
// that backend gives r one (two backends may fail the same way and say it
// in their own words), else some registered backend's (RepairFor).
func RepairOf(cs *v1.CredentialSet, r reason.Reason) (Repair, bool) {
	if e, ok := For(cs); ok {
		for _, rp := range e.Describe.Repairs {
			if rp.Reason == r {
				return rp, true
			}
		}
	}
	return RepairFor(r)
}

// Repairs are every registered backend's repairs, in registration order.
func Repairs() []Repair {
	var out []Repair
	for _, e := range Entries() {
		out = append(out, e.Describe.Repairs...)
	}
	return out
}
