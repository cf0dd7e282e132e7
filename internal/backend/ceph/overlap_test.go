package ceph

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

func overlapSpec(keep int32, names ...string) v1.CephSpec {
	var es []v1.CephEntity
	for _, n := range names {
		es = append(es, v1.CephEntity{Name: n, Caps: v1.CephCaps{Mon: "profile rbd", OSD: "profile rbd pool=ov"}})
	}
	return v1.CephSpec{Strategy: v1.CephOverlapping, KeepPriorKeyCount: &keep, Entities: es}
}

// Overlapping rotation on a real mon, for keepPriorKeyCount 0, 1 and 2:
// during the overlap both generations log in; after Retire exactly the
// keepPriorKeyCount generations before the new one remain, and the
// deleted ones are refused.
func TestOverlappingRotation(t *testing.T) {
	c := sharedCeph(t)
	for _, keep := range []int32{0, 1, 2} {
		t.Run(fmt.Sprintf("keep=%d", keep), func(t *testing.T) {
			t.Parallel()
			base := fmt.Sprintf("client.ov-k%d", keep)
			f := newFixture(t, c, overlapSpec(keep, base))
			ctx := ctxFor(t)
			if tr := f.b.Traits(); !tr.ReadBack || !tr.Overlap {
				t.Fatalf("Traits = %+v, want ReadBack and Overlap", tr)
			}
			// Three generations from earlier rotations; Provision adopts
			// the newest.
			var old []Keyring
			for g := 1; g <= 3; g++ {
				old = append(old, f.createOwned(t, fmt.Sprintf("%s.%d", base, g), "mon", "profile rbd"))
			}
			p, err := f.b.Provision(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			cur := p.Secrets
			if p.Generation != 3 || keyringIn(t, cur, base) != old[2] {
				t.Fatalf("Provision adopted generation %d, want the newest, 3", p.Generation)
			}
			if n, err := f.b.Priors(ctx, cur); err != nil || n != 2 {
				t.Fatalf("Priors = %d, %v; want 2", n, err)
			}

			pending, err := f.b.Apply(ctx, cur, nil, 4)
			if err != nil {
				t.Fatal(err)
			}
			next := keyringIn(t, pending, base)
			if next.Entity != base+".4" {
				t.Fatalf("Apply made %s, want %s.4", next.Entity, base)
			}
			if caps := f.entities(t)[next.Entity].Caps; caps["mon"] != "profile rbd" || caps["osd"] != "profile rbd pool=ov" {
				t.Fatalf("%s has caps %v, want the spec's", next.Entity, caps)
			}
			f.mustAuth(t, old[2], true)
			f.mustAuth(t, next, true)

			if err := f.b.Retire(ctx, cur, pending); err != nil {
				t.Fatal(err)
			}
			want := []int64{4}
			for g := int64(3); g > 3-int64(keep); g-- {
				want = append(want, g)
			}
			if got := f.generationsOf(t, base); !slices.Equal(got, want) {
				t.Fatalf("generations after Retire: %v, want %v", got, want)
			}
			if n, err := f.b.Priors(ctx, pending); err != nil || n != int(keep) {
				t.Fatalf("Priors after Retire = %d, %v; want %d", n, err, keep)
			}
			for i, kr := range old {
				f.mustAuth(t, kr, int64(i+1) > 3-int64(keep))
			}
			f.mustAuth(t, next, true)
			if removed := f.reported(reason.PriorKeysRetired); len(removed) != 1 || !strings.Contains(removed[0], base+".1") {
				t.Fatalf("reports %v, want one PriorKeysRetired naming %s.1", removed, base)
			}
			// Retire again (a crash after it): nothing more goes.
			if err := f.b.Retire(ctx, cur, pending); err != nil {
				t.Fatal(err)
			}
			if got := f.generationsOf(t, base); !slices.Equal(got, want) {
				t.Fatalf("a repeated Retire changed the generations to %v", got)
			}
			f.noKeysInReports(t)
		})
	}
}

// A crash between creating a generation and storing its key leaves an
// entity nobody holds a key for. Apply for the same generation reads its
// key back; Apply for another generation (the engine moved on) removes it
// and reports it.
func TestOverlappingCrashLeftovers(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	base := "client.orphan"
	f := newFixture(t, c, overlapSpec(1, base))
	ctx := ctxFor(t)
	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cur := p.Secrets
	if p.Generation != 1 || keyringIn(t, cur, base).Entity != base+".1" {
		t.Fatalf("Provision of a missing entity made generation %d, want %s.1", p.Generation, base)
	}

	minted := f.createOwned(t, base+".2", "mon", "profile rbd", "osd", "profile rbd pool=ov")
	pending, err := f.b.Apply(ctx, cur, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if keyringIn(t, pending, base) != minted {
		t.Fatal("Apply after a crash did not read back the generation it had created")
	}

	orphan := f.createOwned(t, base+".7", "mon", "profile rbd")
	pending, err = f.b.Apply(ctx, cur, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.generationsOf(t, base); !slices.Equal(got, []int64{3, 1}) {
		t.Fatalf("generations after Apply of 3: %v, want [3 1] (the orphans 2 and 7 removed)", got)
	}
	f.mustAuth(t, orphan, false)
	f.mustAuth(t, keyringIn(t, pending, base), true)
	f.mustAuth(t, keyringIn(t, cur, base), true)
	rep := f.reported(reason.OrphanRemoved)
	if len(rep) != 1 || !strings.Contains(rep[0], base+".2") || !strings.Contains(rep[0], base+".7") {
		t.Fatalf("reports %v, want one OrphanRemoved naming %s.2 and %s.7", rep, base, base)
	}

	// Until then no rotation starts from generation 1 (a status restored
	// from before generation 3 looks so): consumers may hold its key.
	f.wantRefusal(t, f.b.Precheck(ctx, cur), reason.DualPasswordExists, base+".3")
	f.mustAuth(t, keyringIn(t, pending, base), true)

	// Roll back: the new generation goes, the current one stays.
	if err := f.b.Reset(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if got := f.generationsOf(t, base); !slices.Equal(got, []int64{1}) {
		t.Fatalf("generations after Reset: %v, want [1]", got)
	}
	if err := f.b.Precheck(ctx, cur); err != nil {
		t.Fatal(err)
	}
	f.mustAuth(t, keyringIn(t, cur, base), true)
	if _, err := f.b.Apply(ctx, cur, nil, 1); err == nil {
		t.Fatal("Apply of a generation that is not newer than the current one succeeded")
	}
	// A current key the cluster lost cannot be rolled back to.
	wrong := engine.Secrets{base: Keyring{Entity: base + ".1", Key: orphan.Key}.String()}
	f.wantRefusal(t, f.b.Reset(ctx, wrong), reason.KeyMismatch, base)
	f.noKeysInReports(t)
}

// A key from before rekey (the bare entity) is generation 0: adopted, then
// retired like any prior generation.
func TestOverlappingBrownfield(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	base := "client.brown"
	f := newFixture(t, c, overlapSpec(0, base))
	ctx := ctxFor(t)
	bare := f.create(t, base, "mon", "allow r")
	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Generation != 0 || keyringIn(t, p.Secrets, base) != bare {
		t.Fatalf("Provision: generation %d, want the bare entity adopted as 0", p.Generation)
	}
	pending, err := f.b.Apply(ctx, p.Secrets, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.b.Retire(ctx, p.Secrets, pending); err != nil {
		t.Fatal(err)
	}
	if got := f.generationsOf(t, base); !slices.Equal(got, []int64{1}) {
		t.Fatalf("generations: %v, want only 1 (keepPriorKeyCount 0 retires the bare entity)", got)
	}
	f.mustAuth(t, bare, false)
}
