package ceph

import (
	"strings"
	"testing"

	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// An admin rotation interrupted while the rotator exists and the admin's
// stored keyring works (after step 2, before step 4 rotates the admin; or
// after step 7, before step 8 removes the rotator), then a person changes
// the rotator: its key (ceph auth rotate) or its caps. Its stored keyring
// can no longer run step 3, which RecoverAdmin retried at every reconcile
// (AdminRotationFailed, "the stored rotator keyring finishes it"). Now the
// admin removes it and deletes its keyring (steps 8 and 9); the admin's
// stored keyring works throughout, and Apply then rotates the admin from
// step 1 (stopped before step 4) or adopts the key step 4 made (after 7).
// The explorer's model: internal/explorer TestCephAdminRotatorChanged.
func TestRecoverAdminRotatorChanged(t *testing.T) {
	t.Parallel()
	c := testenv.CephForTest(t)
	for _, tc := range []struct {
		name, admin string
		step7, caps bool
	}{
		{"after step 2 key rotated", "client.radm-key", false, false},
		{"after step 2 caps changed", "client.radm-caps", false, true},
		{"after step 7 key rotated", "client.radm-seven", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ctx := adminFixture(t, c, tc.admin), ctxFor(t)
			p, err := f.b.Provision(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			f.rotatedToStep2(t)
			if tc.step7 {
				f.rotatedToStep7(t, tc.admin)
			}
			f.changeRotator(t, tc.caps)
			stored := f.storedAdminOf(t, tc.admin)
			if rec, err := f.b.RecoverAdmin(ctx); !rec || err != nil {
				t.Fatalf("RecoverAdmin with the rotator changed by a person = %v, %v", rec, err)
			}
			if _, ok := f.entities(t)[RotatorEntity]; ok || f.rotatorStored(t) {
				t.Fatal("the changed rotator outlived the recovery")
			}
			if f.storedAdminOf(t, tc.admin) != stored || !f.adminWorks(t, stored) {
				t.Fatal("the recovery changed the admin's stored keyring, or it stopped working")
			}
			if n := f.reported(reason.AdminRotationFailed); len(n) != 0 || len(f.reported(reason.AdminRotationRecovered)) != 1 {
				t.Fatalf("reports %q, want one AdminRotationRecovered", f.reports)
			}
			got, err := f.b.Apply(ctx, p.Secrets, nil, 2)
			if err != nil {
				t.Fatal(err)
			}
			kr := keyringIn(t, got, tc.admin)
			if tc.step7 != (kr == stored) || f.storedAdminOf(t, tc.admin) != kr || !f.adminWorks(t, kr) {
				t.Fatalf("Apply after the recovery: rotated=%v, want %v (or the store lost it)", kr != stored, !tc.step7)
			}
			if _, ok := f.entities(t)[RotatorEntity]; ok || f.rotatorStored(t) {
				t.Fatal("the rotator outlived the rotation")
			}
			f.noKeysInReports(t)
		})
	}
}

// The admin's caps changed by a person (its `auth ls` refused with EACCES:
// PermissionDenied) while an admin rotation is interrupted. RecoverAdmin
// ran step 3 with the stored rotator anyway: refused too (removed at step
// 8, or its key changed), it retried at every reconcile; valid, it rotated
// the admin's key again at every reconcile and stopped at step 5. Now it
// is the admin's refusal, naming the caps to give, changing nothing, with
// the note that the rotator keyring is refused too when it is; the caps
// given back, recovery finishes (step 9, or the rotator removed).
func TestRecoverAdminCapsRefused(t *testing.T) {
	t.Parallel()
	c := testenv.CephForTest(t)
	for _, tc := range []struct {
		name, admin, rotator string // rotator: removed, changed, valid
	}{
		{"rotator removed", "client.dadm-removed", "removed"},
		{"rotator key changed", "client.dadm-changed", "changed"},
		{"rotator valid", "client.dadm-valid", "valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ctx := adminFixture(t, c, tc.admin), ctxFor(t)
			if tc.rotator == "removed" {
				f.rotatedToStep8(t, tc.admin)
			} else {
				f.rotatedToStep2(t)
			}
			if tc.rotator == "changed" {
				f.changeRotator(t, false)
			}
			rotator := f.entities(t)[RotatorEntity]
			stored := f.storedAdminOf(t, tc.admin)
			f.setCaps(t, tc.admin, "allow r")
			_, err := f.b.RecoverAdmin(ctx)
			msg := f.wantRefusal(t, err, reason.PermissionDenied, tc.admin)
			too := "the stored " + RotatorEntity + " keyring is refused too"
			if !strings.Contains(msg, "give "+tc.admin+" the caps") || strings.Contains(msg, too) != (tc.rotator != "valid") {
				t.Fatalf("RecoverAdmin's refusal %q does not name the caps, or the rotator's refusal wrongly", msg)
			}
			if len(f.reported(reason.AdminRotationFailed)) != 0 || !f.rotatorStored(t) || f.storedAdminOf(t, tc.admin) != stored ||
				f.entities(t)[tc.admin].Key != stored.Key || f.entities(t)[RotatorEntity].Key != rotator.Key {
				t.Fatal("a refused recovery changed the cluster or the store")
			}
			f.setCaps(t, tc.admin, "allow *") // as the refusal says
			if rec, err := f.b.RecoverAdmin(ctx); !rec || err != nil {
				t.Fatalf("RecoverAdmin with the caps given back = %v, %v", rec, err)
			}
			admin := f.storedAdminOf(t, tc.admin)
			if _, ok := f.entities(t)[RotatorEntity]; ok || f.rotatorStored(t) || !f.adminWorks(t, admin) {
				t.Fatal("the recovery did not finish with a working admin keyring stored")
			}
			f.noKeysInReports(t)
		})
	}
}

// rotatedToStep2 is an admin rotation stopped after step 2: the rotator
// made with admin caps and its keyring stored.
func (f *fixture) rotatedToStep2(t *testing.T) {
	t.Helper()
	// The subtests share the mon: a rotator a failed one left is not the next one's.
	ctx := ctxFor(t)
	t.Cleanup(func() { _, _ = f.c.CLI(ctx, "auth", "rm", RotatorEntity) })
	if err := f.store.SaveRotator(ctx, f.create(t, RotatorEntity, rotatorCaps...).String()); err != nil {
		t.Fatal(err)
	}
}

// rotatedToStep7 goes on from step 2 to step 7: the admin's key rotated
// by the rotator and stored; the rotator still there.
func (f *fixture) rotatedToStep7(t *testing.T, admin string) {
	t.Helper()
	ctx := ctxFor(t)
	text, _, err := f.store.LoadRotator(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rotator, err := parseKeyringFor(text, RotatorEntity)
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.c.CLIAs(ctx, rotator.Entity, rotator.Key, "auth", "rotate", admin, "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := decodeEntry(out, admin, "auth rotate")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.SaveAdmin(ctx, e.keyring().String()); err != nil {
		t.Fatal(err)
	}
}

// changeRotator is a person's change of the rotator: its key rotated, or
// its caps cut to what cannot list the auth database.
func (f *fixture) changeRotator(t *testing.T, caps bool) {
	t.Helper()
	if !caps {
		f.byHand(t, RotatorEntity, false)
		return
	}
	f.setCaps(t, RotatorEntity, "allow r")
}

// setCaps sets entity's mon cap as a person would (ceph auth caps, as the
// test environment's client.admin), its other caps the rotator's.
func (f *fixture) setCaps(t *testing.T, entity, mon string) {
	t.Helper()
	if _, err := f.c.CLI(ctxFor(t), "auth", "caps", entity, "mon", mon, "osd", "allow *", "mds", "allow *", "mgr", "allow *"); err != nil {
		t.Fatal(err)
	}
}
