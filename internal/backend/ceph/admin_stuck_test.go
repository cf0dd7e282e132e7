package ceph

import (
	"strings"
	"testing"

	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// An admin rotation interrupted with the admin's key refused (a person
// rotated it after step 2, or a crash after step 4 left the rotator's
// rotation unstored) and the rotator's caps cut by a person, its key still
// valid: step 3 as the rotator got EACCES and RecoverAdmin retried it at
// every reconcile (AdminRotationFailed), and the admin, refused, cannot
// remove the rotator. Now it is the admin's refusal with a note naming
// `ceph auth caps` for the rotator, changing nothing; the caps given back,
// the rotator finishes the rotation. With the admin's caps cut instead of
// its key, the admin's PermissionDenied stands as before, and its caps
// given back, the changed rotator is removed (dropRotator).
func TestRecoverAdminRotatorCapsCut(t *testing.T) {
	t.Parallel()
	c := testenv.CephForTest(t)
	for _, tc := range []struct {
		name, admin, how string // how the admin is refused: key, step4, caps
	}{
		{"admin key rotated by hand", "client.cadm-key", "key"},
		{"admin key rotated at step 4", "client.cadm-step4", "step4"},
		{"admin caps cut", "client.cadm-caps", "caps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ctx := adminFixture(t, c, tc.admin), ctxFor(t)
			f.rotatedToStep2(t)
			rotator := f.storedRotator(t)
			switch tc.how {
			case "key":
				f.byHand(t, tc.admin, false)
			case "step4":
				if _, err := f.c.CLIAs(ctx, rotator.Entity, rotator.Key, "auth", "rotate", tc.admin); err != nil {
					t.Fatal(err)
				}
			case "caps":
				f.setCaps(t, tc.admin, "allow r")
			}
			f.setCaps(t, RotatorEntity, "allow r")
			stored, adminKey := f.storedAdminOf(t, tc.admin), f.entities(t)[tc.admin].Key
			want, way := reason.AuthenticationFailed, "ceph auth caps "+RotatorEntity+" mon 'allow *'"
			if tc.how == "caps" {
				want, way = reason.PermissionDenied, "give "+tc.admin+" the caps"
			}
			for range 2 { // the same refusal at every reconcile, nothing changed
				_, err := f.b.RecoverAdmin(ctx)
				if msg := f.wantRefusal(t, err, want, tc.admin); !strings.Contains(msg, way) || len(msg) > 900 {
					t.Fatalf("RecoverAdmin's refusal %q (%d bytes) does not name %q, or is too long for an Event", msg, len(msg), way)
				}
			}
			if len(f.reported(reason.AdminRotationFailed)) != 0 || f.storedRotator(t) != rotator || f.storedAdminOf(t, tc.admin) != stored ||
				f.entities(t)[tc.admin].Key != adminKey || f.entities(t)[RotatorEntity].Key != rotator.Key {
				t.Fatal("a refused recovery changed the cluster or the store")
			}
			if tc.how == "caps" {
				f.setCaps(t, tc.admin, "allow *")
			} else {
				f.setCaps(t, RotatorEntity, "allow *")
			}
			if rec, err := f.b.RecoverAdmin(ctx); !rec || err != nil {
				t.Fatalf("RecoverAdmin after the named step = %v, %v", rec, err)
			}
			if _, ok := f.entities(t)[RotatorEntity]; ok || f.rotatorStored(t) || !f.adminWorks(t, f.storedAdminOf(t, tc.admin)) {
				t.Fatal("the recovery did not finish with a working admin keyring stored")
			}
			f.noKeysInReports(t)
		})
	}
}

// A stored rotator keyring that does not parse (a person edited its
// Secret): RecoverAdmin returned a plain error at every reconcile. With
// the admin's keyring working (a rotation stopped before step 4 or after
// step 7) the rotator is removed and its keyring deleted, as for a rotator
// a person changed; with the admin refused the unreadable keyring may
// stand for the one key left (a crash after step 4), so nothing changes
// and the admin's refusal says the rotator keyring does not parse and how
// to put it back; once it or the admin's keyring is back, recovery finishes.
func TestRecoverAdminRotatorUnparseable(t *testing.T) {
	t.Parallel()
	c := testenv.CephForTest(t)
	// No comma in a subtest's name: its work folder is in ceph -c's path,
	// a comma-separated list.
	const edited = "[" + RotatorEntity + "]\n\tkey = AQ==\n"
	for _, tc := range []struct {
		name, admin, how string // how: works, step4 (rotator kept), step8 (rotator removed)
	}{
		{"admin works", "client.uadm-works", "works"},
		{"admin refused rotator kept", "client.uadm-step4", "step4"},
		{"admin refused rotator removed", "client.uadm-step8", "step8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ctx := adminFixture(t, c, tc.admin), ctxFor(t)
			var current Keyring // the admin's key only the cluster holds
			if tc.how == "step8" {
				f.rotatedToStep8(t, tc.admin)
				current = f.byHand(t, tc.admin, false)
			} else {
				f.rotatedToStep2(t)
			}
			rotator := f.storedRotator(t)
			if tc.how == "step4" {
				if _, err := f.c.CLIAs(ctx, rotator.Entity, rotator.Key, "auth", "rotate", tc.admin); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.store.SaveRotator(ctx, edited); err != nil {
				t.Fatal(err)
			}
			stored := f.storedAdminOf(t, tc.admin)
			if tc.how == "works" {
				if rec, err := f.b.RecoverAdmin(ctx); !rec || err != nil {
					t.Fatalf("RecoverAdmin with the admin working = %v, %v", rec, err)
				}
				if _, ok := f.entities(t)[RotatorEntity]; ok || f.rotatorStored(t) || f.storedAdminOf(t, tc.admin) != stored || !f.adminWorks(t, stored) {
					t.Fatal("the rotator outlived the recovery, or the admin's stored keyring changed")
				}
				if len(f.reported(reason.AdminRotationRecovered)) != 1 {
					t.Fatalf("reports %q, want one AdminRotationRecovered", f.reports)
				}
				f.noKeysInReports(t)
				return
			}
			for range 2 {
				_, err := f.b.RecoverAdmin(ctx)
				msg := f.wantRefusal(t, err, reason.AuthenticationFailed, tc.admin)
				if !strings.Contains(msg, "keyring does not parse") || !strings.Contains(msg, "ceph auth get "+RotatorEntity) || len(msg) > 900 {
					t.Fatalf("RecoverAdmin's refusal %q (%d bytes) does not say the rotator keyring does not parse and how to restore it", msg, len(msg))
				}
			}
			if text, ok, err := f.store.LoadRotator(ctx); err != nil || !ok || text != edited || f.storedAdminOf(t, tc.admin) != stored {
				t.Fatal("a refused recovery changed the store")
			}
			if tc.how == "step4" { // the rotator's keyring put back, as the refusal says
				if err := f.store.SaveRotator(ctx, rotator.String()); err != nil {
					t.Fatal(err)
				}
			} else if err := f.store.SaveAdmin(ctx, current.String()); err != nil {
				t.Fatal(err)
			}
			if rec, err := f.b.RecoverAdmin(ctx); !rec || err != nil {
				t.Fatalf("RecoverAdmin after the named step = %v, %v", rec, err)
			}
			if _, ok := f.entities(t)[RotatorEntity]; ok || f.rotatorStored(t) || !f.adminWorks(t, f.storedAdminOf(t, tc.admin)) {
				t.Fatal("the recovery did not finish with a working admin keyring stored")
			}
			f.noKeysInReports(t)
		})
	}
}

// storedRotator is the rotator keyring the store holds.
func (f *fixture) storedRotator(t *testing.T) Keyring {
	t.Helper()
	text, ok, err := f.store.LoadRotator(ctxFor(t))
	if err != nil || !ok {
		t.Fatalf("no rotator keyring stored (%v)", err)
	}
	kr, err := parseKeyringFor(text, RotatorEntity)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}
