package ceph

import (
	"slices"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

func TestPlanDeletion(t *testing.T) {
	const me, other = "uid-me", "uid-other"
	mine := func(minted bool) string { return Owner{UID: me, Set: "ns/set"}.record(minted) }
	theirs := Owner{UID: other, Set: "ns/other"}.record(true)
	for _, tc := range []struct {
		name                 string
		records              owners
		bases                []string
		held                 map[string]string
		overlap, deprovision bool
		remove, unmark       []string
		guard                []string
		unknown              []string
	}{{
		name: "Discard, Overlapping: priors and leftovers go, the current stays",
		records: owners{"client.a": mine(false), "client.a.1": mine(true), "client.a.2": mine(true),
			"client.a.3": mine(true), "client.a.9": theirs, "client.b": theirs},
		bases: []string{"client.a"}, held: map[string]string{"client.a": "client.a.2"}, overlap: true,
		remove: []string{"client.a", "client.a.1", "client.a.3"}, unmark: []string{"client.a.2"},
		guard: []string{"client.a"},
	}, {
		name:    "Discard, Overlapping, nothing but the current: no guard",
		records: owners{"client.a.2": mine(true)},
		bases:   []string{"client.a"}, held: map[string]string{"client.a": "client.a.2"}, overlap: true,
		unmark: []string{"client.a.2"},
	}, {
		name:    "Delete, Overlapping: every minted generation goes, an adopted prior too",
		records: owners{"client.a": mine(false), "client.a.1": mine(true), "client.a.2": mine(true), "client.a.9": theirs},
		bases:   []string{"client.a"}, held: map[string]string{"client.a": "client.a.2"}, overlap: true, deprovision: true,
		remove: []string{"client.a", "client.a.1", "client.a.2"},
	}, {
		name:    "Delete, Overlapping: an adopted current generation stays",
		records: owners{"client.a.4": mine(false)},
		bases:   []string{"client.a"}, held: map[string]string{"client.a": "client.a.4"}, overlap: true, deprovision: true,
		unmark: []string{"client.a.4"},
	}, {
		name:    "Discard, InPlace: records only, minted or not",
		records: owners{"client.a": mine(true), "client.b": mine(false), "client.c": theirs},
		bases:   []string{"client.a", "client.b"}, held: map[string]string{"client.a": "client.a", "client.b": "client.b"},
		unmark: []string{"client.a", "client.b"},
	}, {
		name:    "Delete, InPlace: minted goes, adopted stays",
		records: owners{"client.a": mine(true), "client.b": mine(false)},
		bases:   []string{"client.a", "client.b"}, held: map[string]string{"client.a": "client.a", "client.b": "client.b"}, deprovision: true,
		remove: []string{"client.a"}, unmark: []string{"client.b"},
	}, {
		name:    "InPlace does not take a.1 for a generation of a",
		records: owners{"client.a.1": mine(false)},
		bases:   []string{"client.a"}, held: map[string]string{"client.a": "client.a"},
		unmark: []string{"client.a.1"},
	}, {
		name:    "no key held (provisioning stopped, wound down as Delete): minted goes, adopted stays",
		records: owners{"client.a.1": mine(true), "client.b": mine(false), "client.c.5": mine(false)},
		bases:   []string{"client.a", "client.b", "client.c"}, held: map[string]string{}, overlap: true, deprovision: true,
		remove: []string{"client.a.1"}, unmark: []string{"client.b", "client.c.5"},
	}, {
		name: "Discard, a spec entity's key missing from the source Secret: its minted generations stop the deletion",
		records: owners{"client.a.1": mine(true), "client.b.1": mine(true), "client.b.2": mine(true),
			"client.c": mine(false), "client.d.1": theirs},
		bases: []string{"client.a", "client.b", "client.c", "client.d"}, held: map[string]string{"client.a": "client.a.1"}, overlap: true,
		remove: []string{"client.b.1", "client.b.2"}, unmark: []string{"client.a.1", "client.c"}, unknown: []string{"client.b"},
	}, {
		name:    "InPlace, Discard, a spec entity's key missing: the entity stops the deletion",
		records: owners{"client.a": mine(true), "client.b": mine(true)},
		bases:   []string{"client.a", "client.b"}, held: map[string]string{"client.a": "client.a"},
		remove: []string{"client.b"}, unmark: []string{"client.a"}, unknown: []string{"client.b"},
	}, {
		name:    "an entity since removed from the spec: Discard keeps it",
		records: owners{"client.gone.3": mine(true)},
		bases:   []string{"client.a"}, held: map[string]string{"client.a": "client.a.1"}, overlap: true,
		unmark: []string{"client.gone.3"},
	}, {
		name:    "an entity since removed from the spec: Delete deletes it if minted",
		records: owners{"client.gone.3": mine(true), "client.old": mine(false)},
		bases:   []string{"client.a"}, held: map[string]string{"client.a": "client.a.1"}, overlap: true, deprovision: true,
		remove: []string{"client.gone.3"}, unmark: []string{"client.old"},
	}, {
		name:    "the admin is never deleted",
		records: owners{"client.admin": mine(true)},
		bases:   []string{"client.admin"}, held: map[string]string{"client.admin": "client.admin"}, deprovision: true,
		unmark: []string{"client.admin"},
	}, {
		name:    "another set's records only: nothing",
		records: owners{"client.a.1": theirs, "client.a": "garbage"},
		bases:   []string{"client.a"}, held: map[string]string{"client.a": "client.a.2"}, overlap: true, deprovision: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := planDeletion(deletionInput{owner: me, records: tc.records, bases: tc.bases, held: tc.held,
				admin: "client.admin", overlap: tc.overlap, deprovision: tc.deprovision})
			if !slices.Equal(p.remove, tc.remove) || !slices.Equal(p.unmark, tc.unmark) || !slices.Equal(p.guard, tc.guard) || !slices.Equal(p.unknown, tc.unknown) {
				t.Fatalf("plan = remove %v, unmark %v, guard %v, unknown %v; want %v, %v, %v, %v", p.remove, p.unmark, p.guard, p.unknown, tc.remove, tc.unmark, tc.guard, tc.unknown)
			}
		})
	}
}

// createRecorded makes an entity after writing rec as its record, as rekey
// does before it creates one.
func (f *fixture) createRecorded(t *testing.T, entity, rec string, caps ...string) Keyring {
	t.Helper()
	f.setRecord(t, entity, rec)
	return f.create(t, entity, caps...)
}

func (f *fixture) setRecord(t *testing.T, entity, rec string) {
	t.Helper()
	if _, err := f.c.CLI(ctxFor(t), "config-key", "set", ownerPrefix+entity, rec); err != nil {
		t.Fatal(err)
	}
}

// otherSet is a set that is not the fixture's.
var otherSet = Owner{UID: "0a0a0a0a-0000-4000-8000-000000000000", Set: "elsewhere/other"}

// wantGenerations checks which generations of base exist.
func (f *fixture) wantGenerations(t *testing.T, base string, want ...int64) {
	t.Helper()
	if got := f.generationsOf(t, base); !slices.Equal(got, want) {
		t.Fatalf("generations of %s: %v, want %v", base, got, want)
	}
}

// wantRecords checks entities' records: "" for none.
func (f *fixture) wantRecords(t *testing.T, want map[string]string) {
	t.Helper()
	for e, rec := range want {
		if got := f.recordOf(t, e); got != rec {
			t.Fatalf("record of %s = %q, want %q", e, got, rec)
		}
	}
}

// Release (deletionPolicy Discard) on a real mon. Overlapping: the priors
// kept by keepPriorKeyCount, an interrupted rotation's leftover and a
// record whose entity was never created all go, and only the current
// generation stays, still logging in with its key, no longer recorded.
// Another set's generation and an unrecorded one are not touched. A
// current key the cluster does not hold stops it before anything goes.
// InPlace: the entity stays, only its record goes.
func TestReleaseOnTheRealMon(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	base := "client.del-rel"
	f := newFixture(t, c, overlapSpec(2, base))
	minted := f.b.Owner.record(true)
	var gens []Keyring
	for _, g := range []string{".1", ".2", ".3", ".4"} {
		gens = append(gens, f.createRecorded(t, base+g, minted, "mon", "profile rbd"))
	}
	f.setRecord(t, base+".5", minted) // recorded, never created (a crash)
	foreign := f.createRecorded(t, base+".7", otherSet.record(true), "mon", "profile rbd")
	stray := f.create(t, base+".8", "mon", "profile rbd")
	cur := engine.Secrets{base: gens[2].String()}

	changed := engine.Secrets{base: Keyring{Entity: gens[2].Entity, Key: gens[1].Key}.String()}
	f.wantRefusal(t, f.b.Release(ctx, changed), reason.KeyMismatch, base+".3")
	f.wantGenerations(t, base, 8, 7, 4, 3, 2, 1)

	for range 2 { // idempotent
		if err := f.b.Release(ctx, cur); err != nil {
			t.Fatal(err)
		}
		f.wantGenerations(t, base, 8, 7, 3)
		f.wantRecords(t, map[string]string{base + ".1": "", base + ".2": "", base + ".3": "", base + ".4": "",
			base + ".5": "", base + ".7": otherSet.record(true), base + ".8": ""})
		if f.entities(t)[base+".3"].Key != gens[2].Key {
			t.Fatal("the current generation's key changed")
		}
		f.mustAuth(t, gens[2], true)
		f.mustAuth(t, gens[0], false)
		f.mustAuth(t, foreign, true)
		f.mustAuth(t, stray, true)
	}
	rep := f.reported(reason.PriorKeysRetired)
	if len(rep) != 1 || !strings.Contains(rep[0], base+".1, "+base+".2, "+base+".4, "+base+".5") {
		t.Fatalf("reports %v, want one PriorKeysRetired naming .1, .2, .4 and .5", rep)
	}
	f.noKeysInReports(t)

	t.Run("InPlace", func(t *testing.T) {
		ip := newFixture(t, c, inPlaceSpec("client.del-rel-ip"))
		p, err := ip.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		kr := keyringIn(t, p.Secrets, "client.del-rel-ip")
		ip.wantRecords(t, map[string]string{kr.Entity: ip.b.Owner.record(true)})
		for range 2 {
			if err := ip.b.Release(ctx, p.Secrets); err != nil {
				t.Fatal(err)
			}
			ip.wantRecords(t, map[string]string{kr.Entity: ""})
			ip.mustAuth(t, kr, true)
		}
	})
}

// A source Secret that lacks a spec entity's key (restored from a backup
// taken before the entity was added, while its consumers run the key it was
// given since): Release removes nothing, neither that entity's generation
// nor the other entity's prior, and says how to go on; with the key back it
// completes. Deprovision (the consumers gone) removes it.
func TestReleaseWithoutAnEntitysKeyOnTheRealMon(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	a, b := "client.del-miss-a", "client.del-miss-b"
	f := newFixture(t, c, overlapSpec(0, a, b))
	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ka, kb := keyringIn(t, p.Secrets, a), keyringIn(t, p.Secrets, b)
	prior := f.createRecorded(t, a+".7", f.b.Owner.record(true), "mon", "profile rbd")
	restored := engine.Secrets{a: p.Secrets[a]}

	msg := f.wantRefusal(t, f.b.Release(ctx, restored), reason.KeyMismatch, kb.Entity)
	for _, want := range []string{"holds no key for " + b, "deletionPolicy to Retain"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("refusal %q does not say %q", msg, want)
		}
	}
	f.mustAuth(t, kb, true)
	f.mustAuth(t, prior, true)
	f.wantRecords(t, map[string]string{kb.Entity: f.b.Owner.record(true), prior.Entity: f.b.Owner.record(true)})
	f.noKeysInReports(t)

	if err := f.b.Release(ctx, p.Secrets); err != nil {
		t.Fatal(err)
	}
	f.mustAuth(t, ka, true)
	f.mustAuth(t, kb, true)
	f.mustAuth(t, prior, false)
	f.wantRecords(t, map[string]string{ka.Entity: "", kb.Entity: ""})

	d := newFixture(t, c, overlapSpec(0, a+"-d", b+"-d"))
	pd, err := d.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.b.Deprovision(ctx, engine.Secrets{a + "-d": pd.Secrets[a+"-d"]}); err != nil {
		t.Fatal(err)
	}
	d.mustAuth(t, keyringIn(t, pd.Secrets, b+"-d"), false)
	d.mustAuth(t, keyringIn(t, pd.Secrets, a+"-d"), false)
}

// Deprovision (deletionPolicy Delete) on a real mon. Overlapping: every
// minted generation goes, the current one too, and the adopted bare
// entity, a prior generation, goes as Release would remove it; another
// set's generation stays. InPlace: the entity rekey created goes, the one
// it adopted stays with its key, no longer recorded.
func TestDeprovisionOnTheRealMon(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	base := "client.del-dep"
	f := newFixture(t, c, overlapSpec(1, base))
	minted := f.b.Owner.record(true)
	bare := f.createRecorded(t, base, f.b.Owner.record(false), "mon", "profile rbd")
	g1 := f.createRecorded(t, base+".1", minted, "mon", "profile rbd")
	g2 := f.createRecorded(t, base+".2", minted, "mon", "profile rbd")
	foreign := f.createRecorded(t, base+".9", otherSet.record(true), "mon", "profile rbd")
	cur := engine.Secrets{base: g2.String()}
	for range 2 { // idempotent
		if err := f.b.Deprovision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		f.wantGenerations(t, base, 9)
		f.wantRecords(t, map[string]string{base: "", base + ".1": "", base + ".2": "", base + ".9": otherSet.record(true)})
		for _, kr := range []Keyring{bare, g1, g2} {
			f.mustAuth(t, kr, false)
		}
		f.mustAuth(t, foreign, true)
	}
	if rep := f.reported(reason.Deprovisioned); len(rep) != 1 {
		t.Fatalf("reports %v, want one Deprovisioned", rep)
	}
	f.noKeysInReports(t)

	t.Run("InPlace", func(t *testing.T) {
		ip := newFixture(t, c, inPlaceSpec("client.del-dep-adopted", "client.del-dep-minted"))
		// Its own set: the Overlapping part's records are not this one's.
		ip.b.Owner = Owner{UID: "0b0b0b0b-0000-4000-8000-000000000000", Set: "test/inplace"}
		adopted := ip.create(t, "client.del-dep-adopted", "mon", "allow r")
		p, err := ip.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		made := keyringIn(t, p.Secrets, "client.del-dep-minted")
		ip.wantRecords(t, map[string]string{adopted.Entity: ip.b.Owner.record(false), made.Entity: ip.b.Owner.record(true)})
		for range 2 {
			if err := ip.b.Deprovision(ctx, p.Secrets); err != nil {
				t.Fatal(err)
			}
			ents := ip.entities(t)
			if _, ok := ents[made.Entity]; ok {
				t.Fatalf("%s, which rekey created, survived", made.Entity)
			}
			if ents[adopted.Entity].Key != adopted.Key {
				t.Fatalf("%s, which rekey adopted, is gone or has another key", adopted.Entity)
			}
			ip.mustAuth(t, adopted, true)
			ip.wantRecords(t, map[string]string{adopted.Entity: "", made.Entity: ""})
		}
	})
}

// Deleting a set leaves no client.admin-rotator behind: one whose keyring
// was never stored holds admin caps and a key nobody has, and goes; a
// stored keyring left after the rotator went is emptied. (Finishing an
// admin rotation the rotator is still needed for rotates the admin key,
// which the shared mon's other tests run as: that recovery is
// TestAdminRotation's and the crash tests'.)
func TestDeletionLeavesNoRotator(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	f := newFixture(t, c, inPlaceSpec("client.del-rot"))
	admin := f.storedAdmin(t)
	f.create(t, RotatorEntity, "mon", "allow *")
	if err := f.b.Release(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.entities(t)[RotatorEntity]; ok {
		t.Fatal("Release left the unstored rotator")
	}
	if err := f.store.SaveRotator(ctx, Keyring{Entity: RotatorEntity, Key: admin.Key}.String()); err != nil {
		t.Fatal(err)
	}
	if err := f.b.Deprovision(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if f.rotatorStored(t) || f.storedAdmin(t) != admin {
		t.Fatal("Deprovision must empty the stale rotator keyring and keep the admin key")
	}
	if n := len(f.reported(reason.AdminRotationRecovered)); n != 2 {
		t.Fatalf("%d AdminRotationRecovered reports, want 2", n)
	}
}
