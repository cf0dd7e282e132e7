package registry

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// TestRepairFor: a backend's own repair is found by its reason alone,
// whichever set asks; a reason no backend repairs is not.
func TestRepairFor(t *testing.T) {
	isolate(t)
	none := func(*v1.CredentialSet) bool { return false }
	Register(Entry{Kind: "a", Selects: none, Describe: Describe{Repairs: []Repair{{Reason: "Forked", Cause: "a fork"}}}})
	Register(Entry{Kind: "b", Selects: none, Describe: Describe{Repairs: []Repair{{Reason: "Split", Cause: "a split"}, {Reason: "Lost", Cause: "a loss"}}}})
	Register(Entry{Kind: "c", Selects: none})
	for _, c := range []struct {
		r     reason.Reason
		cause string
	}{{"Split", "a split"}, {"Forked", "a fork"}, {reason.KeyMismatch, ""}} {
		rp, ok := RepairFor(c.r)
		if rp.Cause != c.cause || ok != (c.cause != "") {
			t.Errorf("RepairFor(%s) = %+v, %v; want cause %q", c.r, rp, ok, c.cause)
		}
	}
	var got []reason.Reason
	for _, rp := range Repairs() {
		got = append(got, rp.Reason)
	}
	if len(got) != 3 || got[0] != "Forked" || got[1] != "Split" || got[2] != "Lost" {
		t.Errorf("Repairs() = %v, want Forked, Split, Lost", got)
	}
}
