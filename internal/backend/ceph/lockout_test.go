package ceph

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// Provision tells the keys it found (Adopted: their minting version is
// unknown) from the keys it minted, which carry the spec's keyGeneration —
// in the entity's name under Overlapping — so that a new set is not
// rotated again at once. A repeated Provision (a crash before or after the
// keys were stored) decides the same way, from rekey's ownership record.
func TestProvisionAdoptedOrMinted(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()

	t.Run("InPlace one key found", func(t *testing.T) {
		ctx := ctxFor(t)
		f := newFixture(t, c, inPlaceSpec("client.pm-found", "client.pm-new"))
		f.b.InitialGeneration = 3
		existing := f.create(t, "client.pm-found", "mon", "allow r")
		p, err := f.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Adopted || p.Generation != 0 || keyringIn(t, p.Secrets, "client.pm-found") != existing {
			t.Fatalf("Provision: adopted %v generation %d; want the found key adopted, generation 0 (unknown: rotated up to 3 by the policy)", p.Adopted, p.Generation)
		}
	})

	t.Run("InPlace minted at keyGeneration 3 then provisioned again", func(t *testing.T) {
		ctx := ctxFor(t)
		f := newFixture(t, c, inPlaceSpec("client.pm-mint"))
		f.b.InitialGeneration = 3
		p, err := f.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.Adopted || p.Generation != 3 {
			t.Fatalf("Provision: adopted %v generation %d, want minted at 3", p.Adopted, p.Generation)
		}
		if rec := f.recordOf(t, "client.pm-mint"); !strings.HasSuffix(rec, " "+mintedMark) {
			t.Fatalf("record %q does not say rekey minted the key", rec)
		}
		f.mustAuth(t, keyringIn(t, p.Secrets, "client.pm-mint"), true)
		// The source Secret was written, then the manager died.
		again, err := f.b.Provision(ctx, p.Secrets)
		if err != nil || again.Adopted || again.Generation != 3 {
			t.Fatalf("Provision with the stored keys: adopted %v generation %d, %v; want minted at 3", again.Adopted, again.Generation, err)
		}
		// The manager died before storing anything: the key is read back.
		again, err = f.b.Provision(ctx, nil)
		if err != nil || again.Adopted || again.Generation != 3 || again.Secrets["client.pm-mint"] != p.Secrets["client.pm-mint"] {
			t.Fatalf("Provision after a crash before storing: adopted %v generation %d, %v; want the same minted key at 3", again.Adopted, again.Generation, err)
		}
	})

	t.Run("Overlapping minted at keyGeneration 3", func(t *testing.T) {
		ctx := ctxFor(t)
		const base = "client.pm-ov"
		f := newFixture(t, c, overlapSpec(1, base))
		f.b.InitialGeneration = 3
		p, err := f.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		kr := keyringIn(t, p.Secrets, base)
		if p.Adopted || p.Generation != 3 || kr.Entity != base+".3" {
			t.Fatalf("Provision: adopted %v generation %d entity %s, want %s.3 minted", p.Adopted, p.Generation, kr.Entity, base)
		}
		if got := f.generationsOf(t, base); !slices.Equal(got, []int64{3}) {
			t.Fatalf("generations %v, want only 3", got)
		}
		f.mustAuth(t, kr, true)
		if n, err := f.b.Priors(ctx, p.Secrets); err != nil || n != 0 {
			t.Fatalf("Priors = %d, %v; want 0", n, err)
		}
	})

	t.Run("Overlapping found generation next to a minted entity", func(t *testing.T) {
		ctx := ctxFor(t)
		const found, fresh = "client.pm-ovfound", "client.pm-ovfresh"
		f := newFixture(t, c, overlapSpec(1, found, fresh))
		f.b.InitialGeneration = 3
		existing := f.create(t, found+".2", "mon", "profile rbd")
		p, err := f.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Adopted || p.Generation != 2 || keyringIn(t, p.Secrets, found) != existing {
			t.Fatalf("Provision: adopted %v generation %d; want %s.2 adopted at generation 2", p.Adopted, p.Generation, found)
		}
		// The set has one generation: the new entity takes the found one's.
		if got := keyringIn(t, p.Secrets, fresh).Entity; got != fresh+".2" {
			t.Fatalf("the minted entity is %s, want %s.2", got, fresh)
		}
	})
}

// versionCLI is a ceph CLI that answers `ceph version` for a mon of the
// given version and runs everything else on the real mon: a mon cannot
// change its version on demand, so the version is set where rekey reads it.
func versionCLI(t *testing.T, c *testenv.Ceph, version string) string {
	t.Helper()
	path := filepath.Join(c.Dir.Host, "ceph-"+version)
	script := `#!/bin/sh
for a; do [ "$a" = version ] && { echo '{"version":"ceph version ` + version + ` (0123abcd) squid (stable)"}'; exit 0; }; done
exec ` + c.CLIPath + ` "$@"
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// InPlace needs `ceph auth rotate`. The real mon is new enough, and
// rotation goes ahead after the version check; a mon that reports an older
// release is refused before any key changes, in Precheck and again in
// Apply. Overlapping does not need the command and goes ahead there.
func TestInPlaceNeedsAuthRotate(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	const name = "client.needs-rotate"
	f := newFixture(t, c, inPlaceSpec(name))
	v, err := f.b.Version(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := inPlaceRefusal(v); err != nil {
		t.Fatalf("the test mon runs %s: %v", v, err)
	}
	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cur := p.Secrets
	if err := f.b.Precheck(ctx, cur); err != nil {
		t.Fatalf("Precheck on the real mon (%s): %v", v, err)
	}

	old := newFixtureCLI(t, c, inPlaceSpec(name), versionCLI(t, c, "19.2.2"))
	msg := old.wantRefusal(t, old.b.Precheck(ctx, cur), reason.InPlaceUnsupported, "19.2.2")
	for _, want := range []string{MinRotateVersion, "strategy: Overlapping"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("refusal %q does not say %q", msg, want)
		}
	}
	_, err = old.b.Apply(ctx, cur, nil, 2)
	old.wantRefusal(t, err, reason.InPlaceUnsupported, "19.2.2")
	if k, err := c.Key(ctx, name); err != nil || k != keyringIn(t, cur, name).Key {
		t.Fatalf("the key changed on a refused rotation (%v)", err)
	}
	f.mustAuth(t, keyringIn(t, cur, name), true)

	// The real mon rotates after the same check.
	pending, err := f.b.Apply(ctx, cur, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	f.mustAuth(t, keyringIn(t, pending, name), true)
	f.mustAuth(t, keyringIn(t, cur, name), false)

	const base = "client.needs-rotate-ov"
	ov := newFixtureCLI(t, c, overlapSpec(1, base), versionCLI(t, c, "19.2.2"))
	po, err := ov.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ov.b.Precheck(ctx, po.Secrets); err != nil {
		t.Fatalf("Overlapping refused on an old mon: %v", err)
	}
	if _, err := ov.b.Apply(ctx, po.Secrets, nil, 2); err != nil {
		t.Fatalf("Overlapping Apply on an old mon: %v", err)
	}
}

// A lowered keepPriorKeyCount is applied without a rotation: TrimPriors
// deletes the generations beyond it below the current one, all recorded
// for the set, and reports it; a prior the set does not own stops it before
// anything is deleted.
func TestTrimPriors(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()

	t.Run("lowered to 1 then 0", func(t *testing.T) {
		ctx := ctxFor(t)
		const base = "client.trim"
		keep := func(k int32) *fixture { return newFixture(t, c, overlapSpec(k, base)) }
		f := keep(2)
		var old []Keyring
		for _, g := range []string{".1", ".2", ".3"} {
			old = append(old, f.createOwned(t, base+g, "mon", "profile rbd"))
		}
		p, err := f.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		cur := p.Secrets
		if err := f.b.TrimPriors(ctx, cur); err != nil || len(f.reported(reason.PriorKeysRetired)) != 0 {
			t.Fatalf("TrimPriors with keepPriorKeyCount 2 and 2 priors: %v, reports %v; want nothing done", err, f.reports)
		}

		one := keep(1)
		if err := one.b.TrimPriors(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if got := f.generationsOf(t, base); !slices.Equal(got, []int64{3, 2}) {
			t.Fatalf("generations with keepPriorKeyCount 1: %v, want [3 2]", got)
		}
		one.mustAuth(t, old[0], false)

		zero := keep(0)
		if err := zero.b.TrimPriors(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if got := f.generationsOf(t, base); !slices.Equal(got, []int64{3}) {
			t.Fatalf("generations with keepPriorKeyCount 0: %v, want [3]", got)
		}
		zero.mustAuth(t, old[1], false)
		zero.mustAuth(t, old[2], true)
		if rep := zero.reported(reason.PriorKeysRetired); len(rep) != 1 || !strings.Contains(rep[0], base+".2") || !strings.Contains(rep[0], "keepPriorKeyCount 0") {
			t.Fatalf("reports %v, want one PriorKeysRetired naming %s.2", zero.reports, base)
		}
		if n, err := zero.b.Priors(ctx, cur); err != nil || n != 0 {
			t.Fatalf("Priors = %d, %v; want 0", n, err)
		}
		if err := zero.b.TrimPriors(ctx, cur); err != nil || len(zero.reported(reason.PriorKeysRetired)) != 1 {
			t.Fatalf("a second TrimPriors: %v, reports %v; want nothing more", err, zero.reports)
		}
		zero.noKeysInReports(t)
	})

	// A prior nobody recorded for the set (made by hand) is refused, and
	// the recorded one next to it stays too.
	t.Run("a prior the set does not own", func(t *testing.T) {
		ctx := ctxFor(t)
		const mixed = "client.trim-mixed"
		m := newFixture(t, c, overlapSpec(0, mixed))
		m.create(t, mixed+".1", "mon", "profile rbd")
		m.createOwned(t, mixed+".2", "mon", "profile rbd")
		m.createOwned(t, mixed+".3", "mon", "profile rbd")
		pm, err := m.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		m.wantRefusal(t, m.b.TrimPriors(ctx, pm.Secrets), reason.NotOwned, mixed+".1")
		if got := m.generationsOf(t, mixed); !slices.Equal(got, []int64{3, 2, 1}) {
			t.Fatalf("generations after the refusal: %v, want [3 2 1]: nothing deleted", got)
		}
		// InPlace keeps no priors.
		ip := newFixture(t, c, inPlaceSpec("client.trim-inplace"))
		if err := ip.b.TrimPriors(ctx, engine.Secrets{}); err != nil {
			t.Fatal(err)
		}
	})
}
