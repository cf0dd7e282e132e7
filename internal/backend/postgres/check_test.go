package postgres

import (
	"context"
	"net"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

func findingOf(t *testing.T, fs []engine.Finding, target, check string) engine.Finding {
	t.Helper()
	for _, f := range fs {
		if f.Target == target && f.Check == check {
			return f
		}
	}
	t.Fatalf("no %s finding of %s in %+v", check, target, fs)
	return engine.Finding{}
}

// TestCheckOnRealPostgres: the checks on a real primary and replica: all
// pass for the cluster's superuser; an admin without CREATEROLE, a group
// that does not exist, a closed port and an untrusted certificate are each
// named with their fix.
func TestCheckOnRealPostgres(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	fs := newTestBackend(t, p, testUID, "chk").Check(ctx, engine.CheckInput{})
	if failed := engine.Failed(fs); len(failed) > 0 {
		t.Fatalf("the superuser fails checks: %+v", failed)
	}
	for _, f := range fs {
		t.Logf("%s %s: %s", f.Target, f.Check, f.Message)
	}

	if err := p.Exec(p.Primary, "CREATE ROLE chk_admin LOGIN PASSWORD 'chk-admin-password-0123456789'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Exec(p.Primary, "DROP ROLE IF EXISTS chk_admin") })
	spec := &v1.PostgresSpec{Hosts: []string{p.Replica.Addr(), p.Primary.Addr()}, Login: v1.PostgresLogin{Base: "chk", Group: "app_owner"}}
	b, err := New(spec, testUID, "chk_admin", "chk-admin-password-0123456789", p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	f := findingOf(t, b.Check(ctx, engine.CheckInput{}), p.Primary.Addr(), "privileges")
	if f.OK || !strings.Contains(f.Message, "lacks CREATEROLE") || f.Fix != `ALTER ROLE "chk_admin" CREATEROLE; (as a superuser)` {
		t.Fatalf("privileges finding %+v", f)
	}

	spec = &v1.PostgresSpec{Hosts: []string{p.Primary.Addr()}, Login: v1.PostgresLogin{Base: "chk", Group: "chk_nosuch"}}
	if b, err = New(spec, testUID, p.AdminUser, p.AdminPassword, p.CAPEM); err != nil {
		t.Fatal(err)
	}
	f = findingOf(t, b.Check(ctx, engine.CheckInput{}), p.Primary.Addr(), "group chk_nosuch")
	if f.OK || !strings.HasPrefix(f.Fix, `CREATE ROLE "chk_nosuch" NOLOGIN;`) {
		t.Fatalf("group finding %+v", f)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	spec = &v1.PostgresSpec{Hosts: []string{closed}, Login: v1.PostgresLogin{Base: "chk", Group: "app_owner"}}
	if b, err = New(spec, testUID, p.AdminUser, p.AdminPassword, p.CAPEM); err != nil {
		t.Fatal(err)
	}
	fs = b.Check(ctx, engine.CheckInput{})
	if f := fs[0]; f.OK || !f.Deferred || f.Message != "nothing listens on "+closed+" (connection refused)" {
		t.Fatalf("closed port: %+v", fs)
	}

	other, err := testenv.OtherCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	if b, err = New(&v1.PostgresSpec{Hosts: []string{p.Primary.Addr()}, Login: v1.PostgresLogin{Base: "chk", Group: "app_owner"}}, testUID, p.AdminUser, p.AdminPassword, other); err != nil {
		t.Fatal(err)
	}
	f = findingOf(t, b.Check(context.Background(), engine.CheckInput{}), p.Primary.Addr(), "tls")
	if f.OK || !strings.Contains(f.Fix, "spec.postgres.tlsCASecretRef") {
		t.Fatalf("tls finding %+v", f)
	}
}
