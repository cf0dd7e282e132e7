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

// TestRepairOf: a set's own backend's words for a reason win over another
// backend's repair of the same reason; a set whose backend has none, or
// that selects no backend, gets the first registered.
func TestRepairOf(t *testing.T) {
	isolate(t)
	sel := func(kind string) func(*v1.CredentialSet) bool {
		return func(cs *v1.CredentialSet) bool { return cs.Annotations["kind"] == kind }
	}
	Register(Entry{Kind: "a", Selects: sel("a"), Describe: Describe{Repairs: []Repair{{Reason: "Forked", Cause: "a's fork"}}}})
	Register(Entry{Kind: "b", Selects: sel("b"), Describe: Describe{Repairs: []Repair{{Reason: "Forked", Cause: "b's fork"}}}})
	Register(Entry{Kind: "c", Selects: sel("c")})
	of := func(kind string) *v1.CredentialSet {
		cs := &v1.CredentialSet{}
		cs.Annotations = map[string]string{"kind": kind}
		return cs
	}
	for kind, want := range map[string]string{"a": "a's fork", "b": "b's fork", "c": "a's fork", "none": "a's fork"} {
		if rp, ok := RepairOf(of(kind), "Forked"); !ok || rp.Cause != want {
			t.Errorf("RepairOf(%s set, Forked) = %+v, %v; want cause %q", kind, rp, ok, want)
		}
	}
	if _, ok := RepairOf(of("b"), "Split"); ok {
		t.Error("RepairOf found a repair no backend gives")
	}
}
