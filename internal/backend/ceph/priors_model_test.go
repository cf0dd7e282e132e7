package ceph

import (
	"slices"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// keepPriorKeyCount 1 through rotations, a rollback and a restored status
// on a real mon, as the explorer's Ceph world models them
// (internal/explorer/cephpriors.go): the discard keeps the generation
// before the new one, which still authenticates (a consumer may still hold
// it); neither Precheck nor the upkeep at rest holds a kept prior against
// the set; the next rotation's Apply and its rollback (Reset) remove only
// generations newer than the current one, so the prior stays; the next
// discard trims it; and a status restored to the kept prior is refused
// (the newer generation unaccounted for) until the reset to it, which
// keeps its key working.
func TestKeptPriorsThroughARotation(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	const base = "client.kept"
	f := newFixture(t, c, overlapSpec(1, base))
	want := func(gens ...int64) {
		t.Helper()
		if got := f.generationsOf(t, base); !slices.Equal(got, gens) {
			t.Fatalf("generations %v, want %v", got, gens)
		}
	}
	priors := func(cur engine.Secrets, n int) {
		t.Helper()
		if got, err := f.b.Priors(ctx, cur); err != nil || got != n {
			t.Fatalf("Priors = %d, %v; want %d", got, err, n)
		}
	}
	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	g1 := p.Secrets
	want(1)
	priors(g1, 0)

	// r1: generation 2, and its discard keeps generation 1.
	g2, err := f.b.Apply(ctx, g1, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.b.Retire(ctx, g1, g2); err != nil {
		t.Fatal(err)
	}
	want(2, 1)
	priors(g2, 1)
	f.mustAuth(t, keyringIn(t, g1, base), true)
	if len(f.reported(reason.PriorKeysRetired)) != 0 {
		t.Fatalf("reports %v: nothing was retired", f.reports)
	}
	// At rest on generation 2, the kept prior is no newer generation.
	if err := f.b.RepairIdle(ctx, g2); err != nil {
		t.Fatalf("RepairIdle with a kept prior: %v", err)
	}
	if err := f.b.Precheck(ctx, g2); err != nil {
		t.Fatalf("Precheck with a kept prior: %v", err)
	}

	// r2 applied, then rolled back: only generation 3 goes.
	g3, err := f.b.Apply(ctx, g2, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	want(3, 2, 1)
	f.mustAuth(t, keyringIn(t, g1, base), true)
	if err := f.b.Reset(ctx, g2); err != nil {
		t.Fatal(err)
	}
	want(2, 1)
	f.mustAuth(t, keyringIn(t, g1, base), true)
	f.mustAuth(t, keyringIn(t, g3, base), false)

	// r2 again, to generation 3 (a new key), and its discard: generation 1
	// is trimmed, 2 kept.
	if err := f.b.Precheck(ctx, g2); err != nil {
		t.Fatal(err)
	}
	g3, err = f.b.Apply(ctx, g2, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.b.Retire(ctx, g2, g3); err != nil {
		t.Fatal(err)
	}
	want(3, 2)
	priors(g3, 1)
	f.mustAuth(t, keyringIn(t, g1, base), false)
	f.mustAuth(t, keyringIn(t, g2, base), true)

	// The status and source Secret restored to generation 2, which the mon
	// still has: generation 3 is unaccounted for, at rest and for the next
	// rotation, until recover's reset to generation 2 removes it.
	f.wantRefusal(t, f.b.RepairIdle(ctx, g2), reason.DualPasswordExists, base+".3")
	f.wantRefusal(t, f.b.Precheck(ctx, g2), reason.DualPasswordExists, base+".3")
	if err := f.b.Reset(ctx, g2); err != nil {
		t.Fatal(err)
	}
	want(2)
	priors(g2, 0)
	f.mustAuth(t, keyringIn(t, g2, base), true)
	if err := f.b.RepairIdle(ctx, g2); err != nil {
		t.Fatal(err)
	}
	f.noKeysInReports(t)
}
