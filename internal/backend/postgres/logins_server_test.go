package postgres

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestSeveralLogins rotates two logins of one set on the real primary and
// replica: each generation is a role per login in its own group; Retire
// drops both old roles, and refuses to drop any while one of the new ones
// does not log in; Reset keeps each current login and drops the rest.
func TestSeveralLogins(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	if err := p.Exec(p.Primary, "CREATE ROLE multi_reader NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	spec := &v1.PostgresSpec{Hosts: []string{p.Replica.Addr(), p.Primary.Addr()}, Logins: []v1.PostgresLogin{
		{Base: "multi_app", Group: "app_owner"}, {Base: "multi_rep", Group: "multi_reader"}}}
	b, err := New(spec, testUID, p.AdminUser, p.AdminPassword, p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	g1, _ := b.NewSecrets(1)
	if prov, err := b.Provision(ctx, g1); err != nil || prov.Generation != 1 || len(prov.Secrets) != 4 {
		t.Fatalf("Provision: %+v, %v", prov.Generation, err)
	}
	assertLogins(t, p, g1, "multi_app_g1", "multi_rep_g1")
	actsAs(t, p, "multi_rep_g1", g1["multi_rep.password"], "multi_reader")

	g2, _ := b.NewSecrets(2)
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	assertLogins(t, p, g1, "multi_app_g1", "multi_rep_g1")
	assertLogins(t, p, g2, "multi_app_g2", "multi_rep_g2")

	// One new login refused: neither old one is dropped.
	wrong := engine.Secrets{}
	for k, v := range g2 {
		wrong[k] = v
	}
	wrong["multi_rep.password"] = "not-its-password-0123456789"
	err = b.Retire(ctx, g1, wrong)
	if !isRefusal(err, reason.PendingRejected) {
		t.Fatalf("Retire with a wrong pending password: %v", err)
	}
	// The discard began: the way out is the password set back, never
	// recover, which an engine refuses once a discard began.
	if msg := err.Error(); !strings.Contains(msg, "back to the source Secret's multi_rep.password_PENDING") || strings.Contains(msg, "recover") {
		t.Errorf("Retire's refusal must name the pending password to set back, and not recover: %v", err)
	}
	if !roleExists(t, p, "multi_app_g1") || !roleExists(t, p, "multi_rep_g1") {
		t.Fatal("an old login was dropped although a new one does not log in")
	}
	if err := b.Retire(ctx, g1, g2); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"multi_app_g1", "multi_rep_g1"} {
		if roleExists(t, p, r) {
			t.Fatalf("%s is left after Retire", r)
		}
	}
	assertLogins(t, p, g2, "multi_app_g2", "multi_rep_g2")
	if err := b.Precheck(ctx, g2); err != nil {
		t.Fatal(err)
	}
	// A repeated Retire (a crash after the drops) finds them gone.
	if err := b.Retire(ctx, g1, g2); err != nil {
		t.Fatalf("Retire again: %v", err)
	}

	// An interrupted rotation to g3, rolled back: Reset keeps g2 alone.
	g3, _ := b.NewSecrets(3)
	if _, err := b.Apply(ctx, g2, g3, 3); err != nil {
		t.Fatal(err)
	}
	// Until then no rotation starts from g2 (a status restored from
	// before g3 looks so): consumers may log in as g3's roles.
	err = b.Precheck(ctx, g2)
	if !isRefusal(err, reason.DualPasswordExists) || !strings.Contains(err.Error(), "multi_app_g3") || !strings.Contains(err.Error(), "kubectl rekey recover") {
		t.Fatalf("Precheck beside g3's logins: %v, want DualPasswordExists naming multi_app_g3 and recover", err)
	}
	for _, pw := range []string{g2["multi_app.password"], g3["multi_app.password"], g3["multi_rep.password"], p.AdminPassword} {
		if strings.Contains(err.Error(), pw) {
			t.Fatal("the refusal holds a password")
		}
	}
	assertLogins(t, p, g3, "multi_app_g3", "multi_rep_g3")
	if err := b.Reset(ctx, g2); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"multi_app_g3", "multi_rep_g3"} {
		if roleExists(t, p, r) {
			t.Fatalf("%s is left after Reset", r)
		}
	}
	assertLogins(t, p, g2, "multi_app_g2", "multi_rep_g2")
	if err := b.Deprovision(ctx, g2); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"multi_app_g2", "multi_rep_g2"} {
		if roleExists(t, p, r) {
			t.Fatalf("%s is left after Deprovision", r)
		}
	}
}

// assertLogins: each role logs in on both instances with the password s
// holds under its login's key.
func assertLogins(t *testing.T, p *testenv.Postgres, s engine.Secrets, roles ...string) {
	t.Helper()
	for _, role := range roles {
		var pw string
		for k, v := range s {
			if v == role {
				pw = s[k[:len(k)-len(KeyUsername)]+KeyPassword]
			}
		}
		for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
			if err := p.CanLogin(i, role, pw); err != nil {
				t.Fatalf("%s on the %s: %v", role, i.Name, err)
			}
		}
	}
}

func actsAs(t *testing.T, p *testenv.Postgres, role, password, group string) {
	t.Helper()
	ctx := ctxT(t)
	c, err := p.Connect(ctx, p.Primary, role, password, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var cur string
	if err := c.QueryRow(ctx, "SELECT current_user").Scan(&cur); err != nil || cur != group {
		t.Fatalf("a session of %s acts as %q (%v), want %s", role, cur, err, group)
	}
}

// TestSeveralLoginsAdoption: in a set of two logins, one adopts the role
// applications log in as today (given its password) and the other starts
// afresh; both are generation 1, and the first rotation's Retire drops
// the adopted role with the other's first generation.
func TestSeveralLoginsAdoption(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	if err := p.Exec(p.Primary, "CREATE ROLE legacy_rep LOGIN PASSWORD 'LegacyRep0123456789'"); err != nil {
		t.Fatal(err)
	}
	spec := &v1.PostgresSpec{Hosts: []string{p.Primary.Addr(), p.Replica.Addr()}, Logins: []v1.PostgresLogin{
		{Base: "ad_app", Group: "app_owner"},
		{Base: "ad_rep", Group: "app_owner", Adopt: &v1.PostgresAdopt{Role: "legacy_rep"}}}}
	b, err := New(spec, testUID, p.AdminUser, p.AdminPassword, p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ProveAdoption(ctx, "ad_rep", "wrong-password-0123"); !isRefusal(err, reason.ProvisionFailed) {
		t.Fatalf("a wrong password: %v", err)
	}
	if err := b.ProveAdoption(ctx, "ad_rep", "LegacyRep0123456789"); err != nil {
		t.Fatal(err)
	}
	g1, _ := b.NewSecrets(1)
	g1["ad_rep.username"], g1["ad_rep.password"] = "legacy_rep", "LegacyRep0123456789"
	prov, err := b.Provision(ctx, g1)
	if err != nil || prov.Generation != 1 || !prov.Adopted {
		t.Fatalf("Provision: generation %d, adopted %v, %v", prov.Generation, prov.Adopted, err)
	}
	assertLogins(t, p, g1, "ad_app_g1", "legacy_rep")
	actsAs(t, p, "legacy_rep", "LegacyRep0123456789", "app_owner")

	g2, _ := b.NewSecrets(2)
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.Retire(ctx, g1, g2); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"legacy_rep", "ad_app_g1"} {
		if roleExists(t, p, r) {
			t.Fatalf("%s is left after the first rotation's Retire", r)
		}
	}
	assertLogins(t, p, g2, "ad_app_g2", "ad_rep_g2")
}
