package postgres

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestModelAdoptedCurrent: what the explorer's PostgreSQL model with
// spec.postgres.adopt (internal/explorer, pgadopt.go) encodes of an
// adopted role that is still the current login, which TestAdoption (the
// adoption, and the first rotation's Retire dropping it) does not show: a
// rotation does not start beside a generation the status does not account
// for (DualPasswordExists); a reset (the rotation rolled back) keeps the
// adopted role, its password set again, with the set's mark, and drops the new
// generation; Deprovision (deletionPolicy Delete) drops every generation
// and hands the adopted role back without the mark, with its password,
// since rekey did not make it; Release (Discard) hands it back the same.
func TestModelAdoptedCurrent(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	const pw = "MadLegacy0123456789"
	if err := p.Exec(p.Primary, "CREATE ROLE mad_legacy LOGIN PASSWORD '"+pw+"'"); err != nil {
		t.Fatal(err)
	}
	spec := &v1.PostgresSpec{Hosts: []string{p.Primary.Addr(), p.Replica.Addr()},
		Login: v1.PostgresLogin{Base: "mad", Group: "app_owner"}, Adopt: &v1.PostgresAdopt{Role: "mad_legacy"}}
	b, err := New(spec, testUID, p.AdminUser, p.AdminPassword, p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	g1 := engine.Secrets{KeyUsername: "mad_legacy", KeyPassword: pw}
	provision := func() {
		t.Helper()
		if err := b.ProveAdoption(ctx, "mad", pw); err != nil {
			t.Fatal(err)
		}
		if got, err := b.Provision(ctx, g1); err != nil || !got.Adopted || got.Generation != 1 {
			t.Fatalf("Provision: %+v, %v", got, err)
		}
		if c := roleComment(t, p, "mad_legacy"); !strings.HasPrefix(c, ownerMark(testUID)) {
			t.Fatalf("the adopted mad_legacy carries %q, want the set's mark", c)
		}
	}
	provision()
	g2, _ := b.NewSecrets(2)
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.Precheck(ctx, g1); !isRefusal(err, reason.DualPasswordExists) || !strings.Contains(err.Error(), "mad_g2") {
		t.Fatalf("Precheck of the adopted login beside mad_g2: %v, want DualPasswordExists naming mad_g2", err)
	}
	if err := b.Reset(ctx, g1); err != nil {
		t.Fatal(err)
	}
	if roleExists(t, p, "mad_g2") {
		t.Fatal("Reset left mad_g2")
	}
	assertLogins(t, p, g1, "mad_legacy")
	if c := roleComment(t, p, "mad_legacy"); !strings.HasPrefix(c, ownerMark(testUID)) {
		t.Fatalf("after Reset mad_legacy carries %q, want the set's mark", c)
	}
	if err := b.Precheck(ctx, g1); err != nil {
		t.Fatalf("Precheck after the reset: %v", err)
	}

	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	verifier := rolpassword(t, p, "mad_legacy")
	if err := b.Deprovision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	if roleExists(t, p, "mad_g2") {
		t.Fatal("Deprovision left mad_g2")
	}
	assertLogins(t, p, g1, "mad_legacy")
	if c := roleComment(t, p, "mad_legacy"); c != "" {
		t.Fatalf("Deprovision left mad_legacy with %q, want it handed back without the mark", c)
	}
	if rolpassword(t, p, "mad_legacy") != verifier {
		t.Fatal("Deprovision changed mad_legacy's password")
	}

	provision() // adopted again, then deleted with deletionPolicy Discard
	if err := b.Release(ctx, g1); err != nil {
		t.Fatal(err)
	}
	assertLogins(t, p, g1, "mad_legacy")
	if c := roleComment(t, p, "mad_legacy"); c != "" {
		t.Fatalf("Release left mad_legacy with %q, want it handed back without the mark", c)
	}
}
