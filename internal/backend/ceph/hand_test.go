package ceph

import (
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// A key rotated by hand on a real mon (`ceph auth rotate`), with either
// strategy: the upkeep at rest (RepairIdle) says nothing while the mon
// holds the source Secret's key, then reports the hand change
// (KeyMismatch) naming the way out, and changes nothing on the mon; an
// entity the source Secret lacks (being read back) is not asked about.
func TestRepairIdleReportsAHandRotation(t *testing.T) {
	c := sharedCeph(t)
	for _, tc := range []struct {
		name, entity string
		f            func() *fixture
	}{
		{"InPlace", "client.ru-ip", func() *fixture { return newFixture(t, c, inPlaceSpec("client.ru-ip")) }},
		{"Overlapping", "client.ru-ov", func() *fixture { return newFixture(t, c, overlapSpec(0, "client.ru-ov")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ctx := tc.f(), ctxFor(t)
			p, err := f.b.Provision(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.b.RepairIdle(ctx, p.Secrets); err != nil {
				t.Fatalf("RepairIdle with the mon holding the source Secret's key: %v", err)
			}
			held := keyringIn(t, p.Secrets, tc.entity).Entity // Overlapping: the generation's entity
			if _, err := f.c.CLI(ctx, "auth", "rotate", held); err != nil {
				t.Fatal(err)
			}
			before := f.entities(t)[held].Key
			msg := f.wantRefusal(t, f.b.RepairIdle(ctx, p.Secrets), reason.KeyMismatch, held)
			if !strings.Contains(msg, "delete "+tc.entity+" from the source Secret") {
				t.Fatalf("the report %q does not name the way out", msg)
			}
			if after := f.entities(t)[held].Key; after != before {
				t.Fatal("RepairIdle changed the key on the mon")
			}
			if err := f.b.RepairIdle(ctx, engine.Secrets{}); err != nil {
				t.Fatalf("RepairIdle without the entity in the source Secret (read back under way): %v", err)
			}
		})
	}
}

// An in-place rotation whose key is rotated by hand on a real mon after
// its new key was stored: Verify (before a discard) and Retire refuse it,
// and Apply with the key stored refuses too, each naming the rotation's
// pending entry, not recover or abort; Apply with nothing pending stored
// (the entry deleted, as they say) hands back the mon's key.
func TestInPlaceHandRotatedMidRotation(t *testing.T) {
	f := newFixture(t, sharedCeph(t), inPlaceSpec("client.ru-mid"))
	ctx := ctxFor(t)
	cur, pending, way := f.handRotatedMidRotation(t, "client.ru-mid", "client.ru-mid")
	_, err := f.b.Apply(ctx, cur, pending, 2)
	if msg := f.wantRefusal(t, err, reason.KeyMismatch, "client.ru-mid"); !strings.Contains(msg, way) || strings.Contains(msg, "abort") {
		t.Fatalf("Apply's refusal %q: want the way out (%s), and no abort", msg, way)
	}
	back, err := f.b.Apply(ctx, cur, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	kr := keyringIn(t, back, "client.ru-mid")
	if kr.Key != f.entities(t)["client.ru-mid"].Key || kr.Key == keyringIn(t, pending, "client.ru-mid").Key {
		t.Fatal("Apply with nothing pending stored did not hand back the mon's key")
	}
	f.mustAuth(t, kr, true)
	if err := f.b.Verify(ctx, back); err != nil {
		t.Fatalf("Verify of the key read back: %v", err)
	}
}

// An Overlapping rotation on a real mon whose generations are rotated by
// hand: the new generation's key refused by Verify and Retire naming the
// rotation's pending entry (no recover: Ceph's key cannot be set back),
// and Apply with nothing pending stored hands back the new generation's
// key as the mon holds it; the current generation's key refused by a reset
// naming the read back, nothing deleted.
func TestOverlappingHandRotated(t *testing.T) {
	f := newFixture(t, sharedCeph(t), overlapSpec(0, "client.ru-ovh"))
	ctx := ctxFor(t)
	cur, pending, _ := f.handRotatedMidRotation(t, "client.ru-ovh", "client.ru-ovh.2")
	if !f.authOK(t, keyringIn(t, cur, "client.ru-ovh")) {
		t.Fatal("a refused Retire deleted the current generation")
	}
	back, err := f.b.Apply(ctx, cur, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	kr := keyringIn(t, back, "client.ru-ovh")
	if kr.Entity != "client.ru-ovh.2" || kr.Key != f.entities(t)["client.ru-ovh.2"].Key || kr.Key == keyringIn(t, pending, "client.ru-ovh").Key {
		t.Fatal("Apply with nothing pending stored did not hand back the new generation's key as the mon holds it")
	}
	f.mustAuth(t, kr, true)

	if _, err := f.c.CLI(ctx, "auth", "rotate", "client.ru-ovh.1"); err != nil {
		t.Fatal(err)
	}
	msg := f.wantRefusal(t, f.b.Reset(ctx, cur), reason.KeyMismatch, "client.ru-ovh.1")
	if !strings.Contains(msg, "delete client.ru-ovh from the source Secret") || strings.Contains(msg, "Complete the rotation") {
		t.Fatalf("the reset's refusal %q: want the read back as the way out", msg)
	}
	if _, ok := f.entities(t)["client.ru-ovh.2"]; !ok {
		t.Fatal("a refused reset deleted the newer generation")
	}
}

// handRotatedMidRotation provisions the fixture's one entity name, applies
// a rotation to generation 2, rotates entity's key by hand on the mon, and
// checks that Verify and Retire then refuse the rotation's new key naming
// way (the rotation's pending entry deleted from the source Secret), not
// recover, which cannot set a key Ceph minted back.
func (f *fixture) handRotatedMidRotation(t *testing.T, name, entity string) (cur, pending engine.Secrets, way string) {
	t.Helper()
	ctx := ctxFor(t)
	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cur = p.Secrets
	if pending, err = f.b.Apply(ctx, cur, nil, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.CLI(ctx, "auth", "rotate", entity); err != nil {
		t.Fatal(err)
	}
	way = "delete " + engine.PendingKey(name) + " from the source Secret"
	for what, err := range map[string]error{
		"Verify": f.b.Verify(ctx, pending),
		"Retire": f.b.Retire(ctx, cur, pending),
	} {
		msg := f.wantRefusal(t, err, reason.PendingRejected, entity)
		if !strings.Contains(msg, way) || strings.Contains(msg, "recover") {
			t.Fatalf("%s's refusal %q: want the way out (%s), and no recover", what, msg, way)
		}
	}
	return cur, pending, way
}

// An Overlapping set at rest on a real mon whose status and source Secret
// were restored from before a rotation: the upkeep reports the newer
// generation the status does not account for (DualPasswordExists, naming
// recover), as Precheck does, and changes nothing.
func TestRepairIdleReportsANewerGeneration(t *testing.T) {
	f := newFixture(t, sharedCeph(t), overlapSpec(0, "client.ru-new"))
	ctx := ctxFor(t)
	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Apply(ctx, p.Secrets, nil, 2); err != nil {
		t.Fatal(err)
	}
	msg := f.wantRefusal(t, f.b.RepairIdle(ctx, p.Secrets), reason.DualPasswordExists, "client.ru-new.2")
	if !strings.Contains(msg, "kubectl rekey recover") {
		t.Fatalf("the report %q does not name recover", msg)
	}
	if _, ok := f.entities(t)["client.ru-new.2"]; !ok {
		t.Fatal("RepairIdle removed the newer generation")
	}
}
