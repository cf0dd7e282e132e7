package postgres

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestDisabledAdminOnRealPostgres: PostgreSQL's equivalents of a locked
// account — an admin role altered to NOLOGIN (SQLSTATE 28000) and one whose
// password expired (VALID UNTIL in the past: 28P01, as a wrong password)
// — are AuthenticationFailed refusals that name the role and the statement
// that fixes it, never an unreachable instance (which the controller would
// retry with back-off). Once fixed, the same backend logs in.
func TestDisabledAdminOnRealPostgres(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	const pw = "Disabled-admin-0123456789"
	if err := p.Exec(p.Primary, "CREATE ROLE disadm LOGIN CREATEROLE PASSWORD '"+pw+"'",
		"GRANT app_owner TO disadm WITH ADMIN OPTION"); err != nil {
		t.Fatal(err)
	}
	b, err := New(&v1.PostgresSpec{Hosts: []string{p.Primary.Addr(), p.Replica.Addr()},
		Login: v1.PostgresLogin{Base: "disapp", Group: "app_owner"}}, testUID, "disadm", pw, p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := b.NewSecrets(1)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(when string, want ...string) {
		t.Helper()
		_, err := b.Provision(ctx, secrets)
		if _, unreachable := engine.AsUnreachable(err); unreachable || !isRefusal(err, reason.AuthenticationFailed) {
			t.Fatalf("%s: %v, want AuthenticationFailed", when, err)
		}
		for _, w := range append(want, `"disadm"`, "Nothing was changed") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", when, err, w)
			}
		}
		if strings.Contains(err.Error(), pw) {
			t.Fatalf("%s: the refusal holds the admin's password", when)
		}
		if roleExists(t, p, "disapp_g1") {
			t.Fatalf("%s: a login was created", when)
		}
	}

	if err := p.Exec(p.Primary, "ALTER ROLE disadm NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	refused("admin role NOLOGIN", "28000", "NOLOGIN", `ALTER ROLE "disadm" LOGIN`)

	if err := p.Exec(p.Primary, "ALTER ROLE disadm LOGIN VALID UNTIL '2001-01-01'"); err != nil {
		t.Fatal(err)
	}
	refused("admin password expired", "28P01", "expired", `ALTER ROLE "disadm" VALID UNTIL 'infinity'`)

	if err := p.Exec(p.Primary, `ALTER ROLE "disadm" VALID UNTIL 'infinity'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Provision(ctx, secrets); isRefusal(err, reason.AuthenticationFailed) {
		t.Fatalf("the admin fixed as the refusal said is still refused: %v", err)
	}
}
