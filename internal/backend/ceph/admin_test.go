package ceph

import (
	"errors"
	"os"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// adminWorks tells whether kr can act as an admin (list the auth database),
// which is what rekey needs its stored keyrings for.
func (f *fixture) adminWorks(t *testing.T, kr Keyring) bool {
	t.Helper()
	_, err := f.c.CLIAs(ctxFor(t), kr.Entity, kr.Key, "auth", "ls")
	return err == nil
}

func (f *fixture) storedAdmin(t *testing.T) Keyring {
	t.Helper()
	text, err := f.store.LoadAdmin(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	kr, err := parseKeyringFor(text, "client.admin")
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func (f *fixture) rotatorStored(t *testing.T) bool {
	t.Helper()
	_, ok, err := f.store.LoadRotator(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// The admin key rotates in place through client.admin-rotator as part of
// an in-place set; the entities after it rotate with the new admin key.
// The test environment's own admin keyring is the store, so it follows.
func TestAdminRotation(t *testing.T) {
	t.Parallel()
	c := testenv.CephForTest(t)
	f := newFixture(t, c, inPlaceSpec("client.admin", "client.after-admin"))
	ctx := ctxFor(t)

	if rec, err := f.b.RecoverAdmin(ctx); err != nil || rec {
		t.Fatalf("RecoverAdmin with nothing to recover = %v, %v", rec, err)
	}
	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cur := p.Secrets
	old := keyringIn(t, cur, "client.admin")
	if old != f.storedAdmin(t) {
		t.Fatal("Provision did not adopt the cluster's admin key")
	}

	pending, err := f.b.Apply(ctx, cur, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	rotated := keyringIn(t, pending, "client.admin")
	if rotated.Key == old.Key || f.storedAdmin(t) != rotated {
		t.Fatal("the admin key did not rotate into the store")
	}
	if f.adminWorks(t, old) || !f.adminWorks(t, rotated) {
		t.Fatal("after rotation the old admin key must be refused and the new one work")
	}
	if after := keyringIn(t, pending, "client.after-admin"); after.Key == keyringIn(t, cur, "client.after-admin").Key {
		t.Fatal("the entity after the admin was not rotated")
	} else {
		f.mustAuth(t, after, true)
	}
	if _, ok := f.entities(t)[RotatorEntity]; ok || f.rotatorStored(t) {
		t.Fatal("the rotator outlived the rotation")
	}
	if n := len(f.reported(reason.AdminKeyRotated)); n != 1 {
		t.Fatalf("%d AdminKeyRotated reports, want 1", n)
	}
	// The engine lost the result: Apply reads the keys back, no second
	// admin rotation.
	again, err := f.b.Apply(ctx, cur, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if again["client.admin"] != pending["client.admin"] || len(f.reported(reason.AdminKeyRotated)) != 1 {
		t.Fatal("a repeated Apply rotated the admin key again")
	}
	if err := f.b.Retire(ctx, cur, pending); err != nil {
		t.Fatal(err)
	}

	// A rotator created but never stored (a crash between steps 1 and 2)
	// has a key nobody knows and admin caps: recovery deletes it.
	f.create(t, RotatorEntity, "mon", "allow *")
	if rec, err := f.b.RecoverAdmin(ctx); err != nil || !rec {
		t.Fatalf("RecoverAdmin with an unstored rotator = %v, %v", rec, err)
	}
	if _, ok := f.entities(t)[RotatorEntity]; ok {
		t.Fatal("the unstored rotator survived recovery")
	}
	// A rotator keyring stored after the rotation finished (step 9
	// missing): CLEANUP only, the admin key stays.
	if err := f.store.SaveRotator(ctx, Keyring{Entity: RotatorEntity, Key: old.Key}.String()); err != nil {
		t.Fatal(err)
	}
	if rec, err := f.b.RecoverAdmin(ctx); err != nil || !rec {
		t.Fatalf("RecoverAdmin after a missed cleanup = %v, %v", rec, err)
	}
	if f.rotatorStored(t) || f.storedAdmin(t) != rotated {
		t.Fatal("cleanup recovery must delete the rotator keyring and keep the admin key")
	}
	if n := len(f.reported(reason.AdminRotationRecovered)); n != 2 {
		t.Fatalf("%d AdminRotationRecovered reports, want 2", n)
	}
	f.noKeysInReports(t)
}

// A stored admin keyring the cluster refuses, with no rotator to fall back
// on, is a clear refusal rather than a retry loop.
func TestRecoverAdminWithoutAnyWorkingKey(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	f := newFixture(t, c, inPlaceSpec("client.nokey"))
	ctx := ctxFor(t)
	stranger := f.create(t, "client.stranger", "mon", "allow r")
	f.store.admin = f.store.rotator + ".admin"
	f.b.Store = f.store
	if err := os.WriteFile(f.store.admin, []byte(Keyring{Entity: "client.admin", Key: stranger.Key}.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := f.b.RecoverAdmin(ctx)
	f.wantRefusal(t, err, reason.AuthenticationFailed, "client.admin")
	if !errors.Is(err, ErrAuthFailed) {
		t.Fatal("the refusal no longer tells ErrAuthFailed")
	}
	if _, ok := engine.AsUnreachable(err); ok {
		t.Fatal("a refused key is not an unreachable mon")
	}
}
