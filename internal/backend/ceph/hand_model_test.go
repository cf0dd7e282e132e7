package ceph

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// Keys changed by a person on a real mon, as the explorer's Ceph worlds
// model them (internal/explorer/cephadmin.go and cephpriors.go, the
// person's handRotate and handRotatePrior): the admin's own key, and a
// prior generation keepPriorKeyCount kept.

// byHand is a person changing entity's key on the mon as client.admin:
// `ceph auth rotate`, or `ceph auth import` of a keyring with a key of the
// person's (another entity's, made and removed for it). It returns the
// entity's new keyring.
func (f *fixture) byHand(t *testing.T, entity string, importKey bool) Keyring {
	t.Helper()
	ctx := ctxFor(t)
	if !importKey {
		out, err := f.c.CLI(ctx, "auth", "rotate", entity, "--format", "json")
		if err != nil {
			t.Fatal(err)
		}
		e, err := decodeEntry(out, entity, "auth rotate")
		if err != nil {
			t.Fatal(err)
		}
		return e.keyring()
	}
	src := f.create(t, entity+"-src", "mon", "allow r")
	if _, err := f.c.CLI(ctx, "auth", "rm", src.Entity); err != nil {
		t.Fatal(err)
	}
	kr := Keyring{Entity: entity, Key: src.Key}
	file, err := os.CreateTemp(f.c.Dir.Host, "import-*.keyring")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(file.Name())
	// import sets the caps too: the entity's own, as `ceph auth get` wrote them.
	text := fmt.Sprintf("[%s]\n\tkey = %s\n", entity, kr.Key)
	for _, typ := range slices.Sorted(maps.Keys(f.entities(t)[entity].Caps)) {
		text += fmt.Sprintf("\tcaps %s = %q\n", typ, f.entities(t)[entity].Caps[typ])
	}
	if _, err := file.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.CLI(ctx, "auth", "import", "-i", filepath.Join(f.c.Dir.Chroot, filepath.Base(file.Name()))); err != nil {
		t.Fatal(err)
	}
	if got := f.entities(t)[entity].Key; got != kr.Key {
		t.Fatalf("ceph auth import left %s with another key", entity)
	}
	return kr
}

// adminFixture is an InPlace set whose one entity is its own admin,
// adminEntity (all caps, made by client.admin), whose keyring the store
// holds in a file of its own: the test environment's client.admin stays
// the person's.
func adminFixture(t *testing.T, c *testenv.Ceph, admin string) *fixture {
	t.Helper()
	spec := inPlaceSpec(admin)
	spec.Admin = v1.CephAdmin{Entity: admin}
	f := newFixture(t, c, spec)
	kr := f.create(t, admin, rotatorCaps...)
	f.store.admin = f.store.rotator + ".admin"
	f.b.Store = f.store
	if err := f.store.SaveAdmin(ctxFor(t), kr.String()); err != nil {
		t.Fatal(err)
	}
	return f
}

// wantAdminRefused: every command is refused for the stored admin keyring
// (AuthenticationFailed, naming the way out), RecoverAdmin's first.
func (f *fixture) wantAdminRefused(t *testing.T, admin string, cur engine.Secrets) {
	t.Helper()
	ctx := ctxFor(t)
	way := "Put " + admin + "'s current keyring there (ceph auth get " + admin + ")"
	_, err := f.b.RecoverAdmin(ctx)
	for what, err := range map[string]error{"RecoverAdmin": err, "RepairIdle": f.b.RepairIdle(ctx, cur), "Precheck": f.b.Precheck(ctx, cur)} {
		if msg := f.wantRefusal(t, err, reason.AuthenticationFailed, admin); !strings.Contains(msg, way) {
			t.Fatalf("%s's refusal %q does not name the way out (%s)", what, msg, way)
		}
	}
}

// The admin's own key changed by a person at rest, with `ceph auth rotate`
// and with `ceph auth import`: every command is refused
// (AuthenticationFailed) naming the admin keyring Secret and `ceph auth
// get`, and nothing changes; once the person puts the current keyring
// there, the upkeep at rest reports the source Secret's key as changed
// (KeyMismatch, naming its deletion), the read back (Provision without
// it) adopts the person's key, and the next rotation rotates the admin
// through the rotator. An admin rotation interrupted with the rotator
// stored (a crash after step 2) and the admin's key then rotated by hand:
// RecoverAdmin rotates it again with the rotator, and Apply adopts that
// key. Stopped after step 8 instead (the rotator removed, its keyring
// stored) and the admin's key then rotated by hand: RecoverAdmin refuses
// as the rest (AuthenticationFailed naming the Secret, saying the rotator
// keyring is refused too), changing nothing, and with the person's
// keyring put there deletes the rotator keyring (step 9).
func TestAdminRotatedByHand(t *testing.T) {
	t.Parallel()
	c := testenv.CephForTest(t)
	for _, importKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("import=%v", importKey), func(t *testing.T) {
			admin := "client.hadm-rotate"
			if importKey {
				admin = "client.hadm-import"
			}
			f, ctx := adminFixture(t, c, admin), ctxFor(t)
			p, err := f.b.Provision(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			cur := p.Secrets
			hand := f.byHand(t, admin, importKey)
			f.wantAdminRefused(t, admin, cur)
			if got := f.entities(t)[admin].Key; got != hand.Key {
				t.Fatal("a refused command changed the admin's key")
			}
			if err := f.store.SaveAdmin(ctx, hand.String()); err != nil { // as the refusal says
				t.Fatal(err)
			}
			if rec, err := f.b.RecoverAdmin(ctx); rec || err != nil {
				t.Fatalf("RecoverAdmin with the person's keyring stored = %v, %v", rec, err)
			}
			msg := f.wantRefusal(t, f.b.RepairIdle(ctx, cur), reason.KeyMismatch, admin)
			if !strings.Contains(msg, "delete "+admin+" from the source Secret") {
				t.Fatalf("the upkeep's report %q does not name the way out", msg)
			}
			back, err := f.b.Provision(ctx, nil)
			if err != nil || keyringIn(t, back.Secrets, admin) != hand {
				t.Fatalf("the read back did not adopt the person's key (%v)", err)
			}
			if err := f.b.Precheck(ctx, back.Secrets); err != nil {
				t.Fatal(err)
			}
			pending, err := f.b.Apply(ctx, back.Secrets, nil, 2)
			if err != nil {
				t.Fatal(err)
			}
			if kr := keyringIn(t, pending, admin); kr.Key == hand.Key || f.storedAdminOf(t, admin) != kr || !f.adminWorks(t, kr) {
				t.Fatal("the next rotation did not rotate the admin into the store")
			}
			if _, ok := f.entities(t)[RotatorEntity]; ok || f.rotatorStored(t) {
				t.Fatal("the rotator outlived the rotation")
			}
		})
	}
	t.Run("rotator stored", func(t *testing.T) {
		const admin = "client.hadm-mid"
		f, ctx := adminFixture(t, c, admin), ctxFor(t)
		p, err := f.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Steps 1 and 2, then a crash; then the person's rotation.
		rotator := f.create(t, RotatorEntity, rotatorCaps...)
		if err := f.store.SaveRotator(ctx, rotator.String()); err != nil {
			t.Fatal(err)
		}
		hand := f.byHand(t, admin, false)
		if rec, err := f.b.RecoverAdmin(ctx); !rec || err != nil {
			t.Fatalf("RecoverAdmin with the rotator stored = %v, %v", rec, err)
		}
		stored := f.storedAdminOf(t, admin)
		if stored.Key == hand.Key || !f.adminWorks(t, stored) || f.rotatorStored(t) {
			t.Fatal("the recovery did not rotate the admin again into the store")
		}
		if _, ok := f.entities(t)[RotatorEntity]; ok {
			t.Fatal("the rotator outlived the recovery")
		}
		got, err := f.b.Apply(ctx, p.Secrets, nil, 2)
		if err != nil || keyringIn(t, got, admin) != stored {
			t.Fatalf("Apply after the recovery did not adopt the admin's key (%v)", err)
		}
	})
	t.Run("rotator removed", func(t *testing.T) {
		const admin = "client.hadm-win"
		f, ctx := adminFixture(t, c, admin), ctxFor(t)
		p, err := f.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		f.rotatedToStep8(t, admin)
		// Then the person's rotation, before the next reconcile.
		hand := f.byHand(t, admin, false)
		stored := f.storedAdminOf(t, admin)
		f.wantAdminRefused(t, admin, p.Secrets)
		_, err = f.b.RecoverAdmin(ctx)
		way := "Put " + admin + "'s current keyring there (ceph auth get " + admin + ")"
		if msg := f.wantRefusal(t, err, reason.AuthenticationFailed, admin); !strings.Contains(msg, way+"; the stored "+RotatorEntity+" keyring is refused too") {
			t.Fatalf("RecoverAdmin's refusal %q does not say the rotator keyring is refused too", msg)
		}
		if n := f.reported(reason.AdminRotationFailed); len(n) != 0 {
			t.Fatalf("RecoverAdmin reported %q: the removed rotator finishes nothing", n)
		}
		if _, ok := f.entities(t)[RotatorEntity]; ok || f.entities(t)[admin].Key != hand.Key || f.storedAdminOf(t, admin) != stored || !f.rotatorStored(t) {
			t.Fatal("a refused recovery changed the cluster or the store")
		}
		if err := f.store.SaveAdmin(ctx, hand.String()); err != nil { // as the refusal says
			t.Fatal(err)
		}
		if rec, err := f.b.RecoverAdmin(ctx); !rec || err != nil {
			t.Fatalf("RecoverAdmin with the person's keyring put back = %v, %v", rec, err)
		}
		if f.rotatorStored(t) || f.storedAdminOf(t, admin) != hand || !f.adminWorks(t, hand) || len(f.reported(reason.AdminRotationRecovered)) != 1 {
			t.Fatal("the recovery did not finish with step 9 alone")
		}
		if _, ok := f.entities(t)[RotatorEntity]; ok {
			t.Fatal("the rotator came back")
		}
	})
}

// rotatedToStep8 is an admin rotation of admin's key stopped after step 8,
// as a crash leaves it: the rotator made and its keyring stored (steps 1,
// 2), the admin's key rotated with it and stored (3-7), the rotator
// removed (8); its keyring still stored (step 9 not run).
func (f *fixture) rotatedToStep8(t *testing.T, admin string) {
	t.Helper()
	ctx := ctxFor(t)
	rotator := f.create(t, RotatorEntity, rotatorCaps...)
	if err := f.store.SaveRotator(ctx, rotator.String()); err != nil {
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
	if _, err := f.c.CLI(ctx, "auth", "rm", RotatorEntity); err != nil {
		t.Fatal(err)
	}
}

// storedAdminOf is the admin keyring the store holds, for admin.
func (f *fixture) storedAdminOf(t *testing.T, admin string) Keyring {
	t.Helper()
	text, err := f.store.LoadAdmin(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	kr, err := parseKeyringFor(text, admin)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}
