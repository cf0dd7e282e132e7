package ceph

import (
	"errors"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

func inPlaceSpec(names ...string) v1.CephSpec {
	var es []v1.CephEntity
	for _, n := range names {
		caps := v1.CephCaps{Mon: "allow r", OSD: "allow rw pool=ip"}
		if strings.HasPrefix(n, "mgr.") {
			caps = v1.CephCaps{Mon: "allow profile mgr", OSD: "allow *", MDS: "allow *"}
		}
		es = append(es, v1.CephEntity{Name: n, Caps: caps})
	}
	return v1.CephSpec{Strategy: v1.CephInPlace, Entities: es}
}

// The whole in-place cycle on a real mon: the old key is refused the
// moment Apply returns, the new one works, and a repeated Apply (a crash
// before the engine stored the keys) reads them back instead of rotating
// again.
func TestInPlaceRotation(t *testing.T) {
	c := sharedCeph(t)
	f := newFixture(t, c, inPlaceSpec("client.ip-a", "mgr.ip"))
	ctx := ctxFor(t)

	if got := f.b.Keys(); strings.Join(got, ",") != "client.ip-a,mgr.ip" {
		t.Fatalf("Keys = %v, want the spec's entities in order", got)
	}
	if tr := f.b.Traits(); !tr.ReadBack || tr.Overlap {
		t.Fatalf("Traits = %+v, want ReadBack without Overlap", tr)
	}
	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Both entities are new: rekey minted them, as generation 1 (the
	// spec asks for no other), with a known minting version.
	if p.Generation != 1 || p.Adopted {
		t.Fatalf("in-place Provision of new entities: generation %d adopted %v, want 1, minted", p.Generation, p.Adopted)
	}
	cur := p.Secrets
	created := f.entities(t)
	if caps := created["mgr.ip"].Caps; caps["mon"] != "allow profile mgr" || caps["osd"] != "allow *" || caps["mds"] != "allow *" || len(caps) != 3 {
		t.Fatalf("mgr.ip created with caps %v, want the spec's", caps)
	}
	if caps := created["client.ip-a"].Caps; caps["mon"] != "allow r" || caps["osd"] != "allow rw pool=ip" || len(caps) != 2 {
		t.Fatalf("client.ip-a created with caps %v, want the spec's", caps)
	}
	for _, n := range f.b.Keys() {
		kr := keyringIn(t, cur, n)
		if kr.Entity != n || created[n].Key != kr.Key {
			t.Fatalf("Provision returned a keyring for %s that is not the cluster's", n)
		}
		f.mustAuth(t, kr, true)
	}
	if err := f.b.Precheck(ctx, cur); err != nil {
		t.Fatal(err)
	}

	pending, err := f.b.Apply(ctx, cur, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range f.b.Keys() {
		old, now := keyringIn(t, cur, n), keyringIn(t, pending, n)
		if old.Key == now.Key || now.Entity != n {
			t.Fatalf("%s: Apply did not rotate in place", n)
		}
		f.mustAuth(t, now, true)
		f.mustAuth(t, old, false)
	}

	again, err := f.b.Apply(ctx, cur, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := f.b.Apply(ctx, cur, pending, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range f.b.Keys() {
		if again[n] != pending[n] || stored[n] != pending[n] {
			t.Fatalf("%s: a repeated Apply rotated again instead of reading the key back", n)
		}
	}

	if err := f.b.Retire(ctx, cur, pending); err != nil {
		t.Fatal(err)
	}
	msg := f.wantRefusal(t, f.b.Reset(ctx, cur), reason.KeyMismatch, "client.ip-a")
	if !strings.Contains(msg, "cannot be rolled back") {
		t.Fatalf("reset refusal %q does not say why", msg)
	}
	if err := f.b.Reset(ctx, pending); err != nil {
		t.Fatalf("Reset to the keys the cluster holds: %v", err)
	}
	// A rotation that started after the engine lost track: the cluster has
	// neither the current nor the stored pending key.
	if _, err := f.b.Apply(ctx, cur, engine.Secrets{"client.ip-a": cur["client.ip-a"], "mgr.ip": cur["mgr.ip"]}, 3); err == nil {
		t.Fatal("Apply with stale current and pending keys succeeded")
	} else {
		f.wantRefusal(t, err, reason.KeyMismatch, "client.ip-a")
	}
	f.noKeysInReports(t)
}

// Provision adopts keys the cluster already has and refuses, naming the
// entity, a source Secret whose key the cluster does not hold.
func TestProvisionAdoptsAndChecks(t *testing.T) {
	c := sharedCeph(t)
	f := newFixture(t, c, inPlaceSpec("client.adopt", "client.fresh"))
	ctx := ctxFor(t)
	existing := f.create(t, "client.adopt", "mon", "allow r")

	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if keyringIn(t, p.Secrets, "client.adopt") != existing {
		t.Fatal("Provision did not adopt client.adopt's existing key")
	}
	if caps := f.entities(t)["client.adopt"].Caps; caps["osd"] != "" {
		t.Fatalf("Provision changed an adopted entity's caps: %v", caps)
	}
	// Half provisioned (a crash after the first entity): only the missing
	// one is made, the held one is checked.
	half := engine.Secrets{"client.adopt": p.Secrets["client.adopt"]}
	p2, err := f.b.Provision(ctx, half)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Secrets["client.fresh"] != p.Secrets["client.fresh"] || p2.Secrets["client.adopt"] != p.Secrets["client.adopt"] {
		t.Fatal("a repeated Provision did not return the same keys")
	}

	other := keyringIn(t, p.Secrets, "client.fresh")
	wrong := engine.Secrets{"client.adopt": Keyring{Entity: "client.adopt", Key: other.Key}.String(), "client.fresh": p.Secrets["client.fresh"]}
	_, err = f.b.Provision(ctx, wrong)
	f.wantRefusal(t, err, reason.KeyMismatch, "client.adopt")
	msg := f.wantRefusal(t, f.b.Precheck(ctx, wrong), reason.KeyMismatch, "client.adopt")
	if !strings.Contains(msg, "nothing was changed") || !strings.Contains(msg, "delete client.adopt from the source Secret") {
		t.Fatalf("precheck refusal %q does not say that nothing was changed and what to do", msg)
	}
	if err := f.b.Precheck(ctx, p.Secrets); err != nil {
		t.Fatal(err)
	}

	if _, err := c.CLI(ctx, "auth", "rm", "client.fresh"); err != nil {
		t.Fatal(err)
	}
	msg = f.wantRefusal(t, f.b.Precheck(ctx, p.Secrets), reason.KeyMismatch, "client.fresh")
	if !strings.Contains(msg, "does not exist") {
		t.Fatalf("refusal for a deleted entity %q does not say so", msg)
	}
	_, err = f.b.Apply(ctx, p.Secrets, nil, 2)
	f.wantRefusal(t, err, reason.KeyMismatch, "client.fresh")
	if f.entities(t)["client.adopt"].Key != existing.Key {
		t.Fatal("an Apply refused for client.fresh rotated client.adopt first")
	}

	// Retire proves the pending keys: a key the cluster does not hold
	// stops it before anything is retired.
	fake := engine.Secrets{"client.adopt": p.Secrets["client.adopt"], "client.fresh": Keyring{Entity: "client.fresh", Key: existing.Key}.String()}
	err = f.b.Retire(ctx, p.Secrets, fake)
	f.wantRefusal(t, err, reason.PendingRejected, "client.fresh")
	if errors.Is(err, ErrAuthFailed) {
		t.Fatal("a refusal must not look like the admin's authentication failing")
	}
}

func TestDecideInPlace(t *testing.T) {
	for _, tc := range []struct {
		cluster, cur, pending string
		want                  InPlaceAction
	}{
		{"new", "old", "new", KeepPending},
		{"old", "old", "", RotateKey},
		{"old", "old", "new", RotateKey},
		{"minted", "old", "", AdoptKey},
		{"other", "old", "new", RefuseKey},
	} {
		if got := DecideInPlace(tc.cluster, tc.cur, tc.pending); got != tc.want {
			t.Errorf("cluster %s, cur %s, pending %q: got %d, want %d", tc.cluster, tc.cur, tc.pending, got, tc.want)
		}
	}
}
