package ceph

import (
	"maps"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
)

// Two sets on one real mon, as the explorer's two-set Ceph world models
// them (internal/explorer/cephtwosets.go): two Backends with different
// owner UIDs, each rotating an entity of its own Overlapping. Each
// operation of one (Provision, Apply, Retire, Reset, RepairIdle, Precheck,
// Release, Deprovision) is interleaved with the other's rotation at every
// stage, and leaves the other's generations, keys and ownership records
// exactly as they were; each set's records carry its own UID.
func TestTwoSetsOnRealMon(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	const a, b = "client.two-sets-a", "client.two-sets-b"
	fa := newFixture(t, c, overlapSpec(0, a))
	fb := newFixture(t, c, overlapSpec(0, b))
	fb.b.Owner = Owner{UID: "0b0b0b0b-0000-4000-8000-000000000002", Set: "team-b/second"}
	if fa.b.Owner.UID == fb.b.Owner.UID {
		t.Fatal("the two sets need owners of their own")
	}

	// snap is every generation of base with its key and its record.
	snap := func(base string) map[string]string {
		t.Helper()
		out := map[string]string{}
		for name, e := range fa.entities(t) {
			if _, ok := generationOf(base, name); ok && name != base {
				out[name] = e.Key + " | " + fa.recordOf(t, name)
			}
		}
		return out
	}
	// untouched runs op of one set and checks the other's base is as it was.
	untouched := func(other, what string, op func() error) {
		t.Helper()
		before := snap(other)
		if err := op(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if after := snap(other); !maps.Equal(before, after) {
			t.Fatalf("%s changed the other set's %s: %v, was %v", what, other, snapNames(after), snapNames(before))
		}
	}
	recordedFor := func(f *fixture, entity string) {
		t.Helper()
		if rec := f.recordOf(t, entity); !strings.HasPrefix(rec, f.b.Owner.UID+" ") {
			t.Fatalf("record of %s = %q, want one carrying %s", entity, rec, f.b.Owner.UID)
		}
	}

	var pa, pb engine.Provisioned
	untouched(b, "A's Provision", func() (err error) { pa, err = fa.b.Provision(ctx, nil); return })
	untouched(a, "B's Provision", func() (err error) { pb, err = fb.b.Provision(ctx, nil); return })
	recordedFor(fa, a+".1")
	recordedFor(fb, b+".1")

	// Both rotate to generation 2, each beside the other's.
	var na2, nb2 engine.Secrets
	untouched(b, "A's Apply", func() (err error) { na2, err = fa.b.Apply(ctx, pa.Secrets, nil, 2); return })
	untouched(a, "B's Apply", func() (err error) { nb2, err = fb.b.Apply(ctx, pb.Secrets, nil, 2); return })
	recordedFor(fa, a+".2")
	recordedFor(fb, b+".2")
	fa.wantGenerations(t, a, 2, 1)
	fb.wantGenerations(t, b, 2, 1)

	// A's discard while B is mid-rotation; B's abort while A is at rest.
	untouched(b, "A's Verify", func() error { return fa.b.Verify(ctx, na2) })
	untouched(b, "A's Retire", func() error { return fa.b.Retire(ctx, pa.Secrets, na2) })
	fa.wantGenerations(t, a, 2)
	untouched(a, "B's Reset", func() error { return fb.b.Reset(ctx, pb.Secrets) })
	fb.wantGenerations(t, b, 1)

	// The upkeep at rest and the precheck of each, beside the other.
	untouched(b, "A's RepairIdle", func() error { return fa.b.RepairIdle(ctx, na2) })
	untouched(a, "B's RepairIdle", func() error { return fb.b.RepairIdle(ctx, pb.Secrets) })
	untouched(b, "A's Precheck", func() error { return fa.b.Precheck(ctx, na2) })
	untouched(b, "A's TrimPriors", func() error { return fa.b.TrimPriors(ctx, na2) })

	// B rotates again; A rotates to 3 and resets back to 2 beside it.
	untouched(a, "B's second Apply", func() (err error) { nb2, err = fb.b.Apply(ctx, pb.Secrets, nil, 2); return })
	untouched(b, "A's Apply to 3", func() (err error) { _, err = fa.b.Apply(ctx, na2, nil, 3); return })
	fa.wantGenerations(t, a, 3, 2)
	untouched(b, "A's Reset", func() error { return fa.b.Reset(ctx, na2) })
	fa.wantGenerations(t, a, 2)
	untouched(a, "B's Retire", func() error { return fb.b.Retire(ctx, pb.Secrets, nb2) })
	fb.wantGenerations(t, b, 2)

	// A rotates again and is deleted with Discard mid-rotation; B, at rest,
	// is deleted with Delete beside what A's Release kept.
	untouched(b, "A's third Apply", func() (err error) { _, err = fa.b.Apply(ctx, na2, nil, 3); return })
	untouched(a, "B's Apply to 3", func() (err error) { _, err = fb.b.Apply(ctx, nb2, nil, 3); return })
	untouched(b, "A's Release", func() error { return fa.b.Release(ctx, na2) })
	fa.wantGenerations(t, a, 2)
	fa.wantRecords(t, map[string]string{a + ".2": "", a + ".3": ""})
	fb.wantGenerations(t, b, 3, 2)
	untouched(a, "B's Deprovision", func() error { return fb.b.Deprovision(ctx, nb2) })
	fb.wantGenerations(t, b)
	fb.wantRecords(t, map[string]string{b + ".2": "", b + ".3": ""})
	fa.mustAuth(t, keyringIn(t, na2, a), true)
	fb.mustAuth(t, keyringIn(t, nb2, b), false)
}

// snapNames are the entities of a snapshot, for a failure's message (no keys).
func snapNames(s map[string]string) []string {
	var out []string
	for n, v := range s {
		_, rec, _ := strings.Cut(v, " | ")
		out = append(out, n+" ("+rec+")")
	}
	return out
}
