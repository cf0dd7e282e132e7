package engine

import (
	"slices"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestUpkeepOf answers, for each state, which upkeep a reconcile runs
// before Decide, and why.
func TestUpkeepOf(t *testing.T) {
	idle := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2}
	recovering := idle
	recovering.ResetPending = true
	dist := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, KeyGeneration: 2, RotateApplied: true}
	started := dist
	started.DiscardStarted = true
	applied := started
	applied.DiscardApplied = true
	rotating := v1.CredentialSetStatus{Phase: v1.PhaseRotating, KeyGeneration: 2}
	rotatingApplied := rotating
	rotatingApplied.RotateApplied = true
	serveCur := Upkeep{Serve: true}
	servePending := Upkeep{Serve: true, UsePending: true}
	with := func(u Upkeep, r Repair) Upkeep { u.Repair = r; return u }
	for _, tc := range []struct {
		name    string
		st      v1.CredentialSetStatus
		pending PendingState
		want    Upkeep
	}{
		{"Idle: serve the current secrets; repair an instance back from a scale-in", idle, PendingNone, with(serveCur, RepairCurrent)},
		{"Idle, pending secrets of another rotation left in the source Secret: never applied, nothing to repair with", idle, PendingStale, serveCur},
		{"Idle, pending secrets for some keys only (a user listed again): its consumers may hold either, until the recovery this reconcile starts resets", idle, PendingPartial, with(serveCur, RepairBoth)},
		{"a recovery's reset owed: consumers restart onto the current secrets", recovering, PendingNone, with(serveCur, RepairCurrent)},
		{"a rollback's reset owed: the rotation's secrets stay valid until it", recovering, PendingStale, with(serveCur, RepairBoth)},
		{"a recovery's reset owed, pending secrets for some keys only (a user listed again): both stay valid until it", recovering, PendingPartial, with(serveCur, RepairBoth)},
		{"Rotating, nothing stored yet: the distribution stays as it is; nothing of it applied anywhere", rotating, PendingNone, with(Upkeep{UsePending: true}, RepairCurrent)},
		{"Rotating, pending stored but not applied everywhere: serve nothing new; Apply's work, which an abort may pre-empt", rotating, PendingMatch, with(Upkeep{UsePending: true}, RepairBoth)},
		{"Rotating, phase 1 recorded: serve the new secrets; an instance rebuilt since would refuse Verify", rotatingApplied, PendingMatch, with(servePending, RepairBoth)},
		{"Rotating, phase 1 recorded, pending missing: stand down", rotatingApplied, PendingNone, Upkeep{UsePending: true}},
		{"Distributed: serve the new secrets; both passwords must be valid everywhere", dist, PendingMatch, with(servePending, RepairBoth)},
		{"Distributed, pending missing: stand down", dist, PendingNone, Upkeep{UsePending: true}},
		{"Distributed, pending of another rotation: never applied", dist, PendingStale, Upkeep{UsePending: true}},
		{"discard started: Retire repairs, with pending only", started, PendingMatch, servePending},
		{"discard applied, pending not yet confirmed: both are the same secrets", applied, PendingMatch, servePending},
		{"discard applied, pending confirmed into current", applied, PendingNone, serveCur},
	} {
		if got := UpkeepOf(tc.st, tc.pending, false); got != tc.want {
			t.Errorf("%s: UpkeepOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := UpkeepOf(v1.CredentialSetStatus{Phase: v1.PhaseIdle}, PendingNone, false); got.Repair != RepairNone {
		t.Errorf("not provisioned: repair %d, want none", got.Repair)
	}
	// Scaled to 0: nothing can refuse anyone, and nobody asked.
	for _, st := range []v1.CredentialSetStatus{idle, recovering, dist} {
		if got := UpkeepOf(st, PendingMatch, true); got.Repair != RepairNone {
			t.Errorf("UpkeepOf(%+v) with no instances: repair %d, which would only report that there are none", st, got.Repair)
		}
	}
}

// TestUpkeepTableInDocs: the concepts page's upkeep table is the engine's.
func TestUpkeepTableInDocs(t *testing.T) {
	got := conceptsTable(t, "upkeep table")
	var want []string
	for _, s := range UpkeepSteps {
		want = append(want, "| `"+s.Step+"` | "+s.When+" | "+s.Does+" |")
	}
	if !slices.Equal(got, want) {
		t.Errorf("docs/concepts.md's upkeep table differs from the engine's; want rows:\n%s", strings.Join(want, "\n"))
	}
}
