package ceph

import (
	"maps"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Two entities rotated Overlapping in one set on a real mon, as the
// explorer's Ceph world models them (internal/explorer/cephentities.go):
// an entity added to a provisioned set is minted at the set's generation;
// an Apply a crash interrupted after the first entity reads that one back
// and makes the second; every step that refuses for one entity changes
// nothing for the other (Precheck, Retire, Reset, Release); the upkeep at
// rest skips an entity the source Secret lacks; status.priorKeyCount is
// the most any entity keeps; a reset's refusal names every entity's
// pending key; and a Discard wind-down removes nothing while the source
// Secret holds no key for an entity.
func TestTwoEntitiesOverlapping(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	const a, b = "client.ent-a", "client.ent-b"
	one := newFixture(t, c, overlapSpec(1, a))
	f := newFixture(t, c, overlapSpec(1, a, b))
	p, err := one.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := one.b.Apply(ctx, p.Secrets, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := one.b.Retire(ctx, p.Secrets, g2); err != nil {
		t.Fatal(err)
	}
	f.wantGenerations(t, a, 2, 1)

	// b added to the spec: provisioned beside a's generation 2, at 2.
	added, err := f.b.Provision(ctx, g2)
	if err != nil {
		t.Fatal(err)
	}
	if added.Generation != 2 || keyringIn(t, added.Secrets, a) != keyringIn(t, g2, a) || keyringIn(t, added.Secrets, b).Entity != b+".2" {
		t.Fatalf("Provision with %s added: generation %d, want 2, %s kept and %s.2 minted", b, added.Generation, a, b)
	}
	cur := added.Secrets
	if n, err := f.b.Priors(ctx, cur); err != nil || n != 1 {
		t.Fatalf("Priors = %d, %v; want 1 (the most any entity keeps)", n, err)
	}
	if err := f.b.RepairIdle(ctx, engine.Secrets{a: cur[a]}); err != nil {
		t.Fatalf("RepairIdle with %s being read back: %v", b, err)
	}

	// An Apply a crash stopped after a's generation 3: the next reads it
	// back and makes b's.
	made := f.createOwned(t, a+".3", "mon", "profile rbd")
	pending, err := f.b.Apply(ctx, cur, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if keyringIn(t, pending, a) != made || keyringIn(t, pending, b).Entity != b+".3" {
		t.Fatal("Apply after a crash did not read a's generation 3 back and make b's")
	}
	f.wantGenerations(t, a, 3, 2, 1)
	f.wantGenerations(t, b, 3, 2)

	// b's pending key wrong: Retire removes nothing, a's prior 1 included.
	wrongB := maps.Clone(pending)
	wrongB[b] = Keyring{Entity: b + ".3", Key: keyringIn(t, cur, b).Key}.String()
	f.wantRefusal(t, f.b.Retire(ctx, cur, wrongB), reason.PendingRejected, b)
	f.wantGenerations(t, a, 3, 2, 1)

	// b's current key wrong: the reset deletes nothing, a's 3 included; a
	// wind-down removes nothing; Precheck refuses a's newer generation
	// first (entity by entity), and b's key once that is gone.
	wrongCur := maps.Clone(cur)
	wrongCur[b] = Keyring{Entity: b + ".2", Key: keyringIn(t, cur, a).Key}.String()
	msg := f.wantRefusal(t, f.b.Reset(ctx, wrongCur), reason.KeyMismatch, b)
	// The way out names every entity's pending key: the read back waits
	// for none to be left (a's would stay otherwise).
	if want := "delete " + b + " from the source Secret (with " + engine.PendingKey(a) + ", " + engine.PendingKey(b) + " and " + engine.RotationIDKey; !strings.Contains(msg, want) {
		t.Fatalf("the reset's refusal %q does not say %q", msg, want)
	}
	f.wantGenerations(t, a, 3, 2, 1)
	f.wantRefusal(t, f.b.Precheck(ctx, wrongCur), reason.DualPasswordExists, a+".3") // entity by entity: a's first
	f.wantRefusal(t, f.b.Release(ctx, wrongCur), reason.KeyMismatch, b)
	f.wantGenerations(t, a, 3, 2, 1)
	f.wantGenerations(t, b, 3, 2)

	// b's generation 3 beside the current 2 refuses the next rotation
	// (after a passed), until the reset removes both 3s.
	f.wantRefusal(t, f.b.Precheck(ctx, cur), reason.DualPasswordExists, a+".3")
	if err := f.b.Reset(ctx, cur); err != nil {
		t.Fatal(err)
	}
	f.wantGenerations(t, a, 2, 1)
	f.wantGenerations(t, b, 2)
	f.wantRefusal(t, f.b.Precheck(ctx, wrongCur), reason.KeyMismatch, b)
	if err := f.b.Precheck(ctx, cur); err != nil {
		t.Fatal(err)
	}

	// The rotation again, and its discard: each keeps one prior.
	pending, err = f.b.Apply(ctx, cur, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.b.Retire(ctx, cur, pending); err != nil {
		t.Fatal(err)
	}
	f.wantGenerations(t, a, 3, 2)
	f.wantGenerations(t, b, 3, 2)

	// Release with b missing from the source Secret (restored from before
	// b was added, say): nothing goes, b's generations and a's prior
	// included, since a consumer may run b's key. With both keys, each
	// current generation stays and the priors go.
	f.wantRefusal(t, f.b.Release(ctx, engine.Secrets{a: pending[a]}), reason.KeyMismatch, b+".3")
	f.wantGenerations(t, a, 3, 2)
	f.wantGenerations(t, b, 3, 2)
	if err := f.b.Release(ctx, pending); err != nil {
		t.Fatal(err)
	}
	f.wantGenerations(t, a, 3)
	f.wantGenerations(t, b, 3)
	f.mustAuth(t, keyringIn(t, pending, a), true)
	f.mustAuth(t, keyringIn(t, pending, b), true)
	f.noKeysInReports(t)
}
