package postgres

import (
	"context"
	"encoding/base64"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

const testUID = "0b6f5a8e-3d1c-4c2b-9a7e-5f4d3c2b1a09"

// One primary and replica serve every test of the package (each with
// roles of its own): starting them is most of a test's time.
var (
	shared     *testenv.Postgres
	sharedErr  error
	sharedOnce sync.Once
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

func cluster(t *testing.T) *testenv.Postgres {
	t.Helper()
	e := testenv.Require(t)
	sharedOnce.Do(func() {
		shared, sharedErr = e.StartPostgres()
		if sharedErr == nil {
			// The group every test's logins join.
			sharedErr = shared.Exec(shared.Primary, "CREATE ROLE app_owner NOLOGIN", "GRANT CREATE ON SCHEMA public TO app_owner")
		}
		if sharedErr == nil {
			t.Logf("PostgreSQL %s: primary %s, replica %s", shared.Version, shared.Primary.Addr(), shared.Replica.Addr())
		}
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func newTestBackend(t *testing.T, p *testenv.Postgres, uid, base string) *Backend {
	t.Helper()
	spec := &v1.PostgresSpec{
		Hosts: []string{p.Replica.Addr(), p.Primary.Addr()}, // the primary is found, not assumed
		Login: v1.PostgresLogin{Base: base, Group: "app_owner"},
	}
	b, err := New(spec, uid, p.AdminUser, p.AdminPassword, p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestOverlappingRotation is a rotation on a real primary and streaming
// replica: a login role per generation acting as the group, SCRAM
// verifiers computed here, the old login dropped only once its sessions
// ended, roles of other owners left alone.
func TestOverlappingRotation(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	b := newTestBackend(t, p, testUID, "app")

	g1, err := b.NewSecrets(1)
	if err != nil {
		t.Fatal(err)
	}
	if g1[KeyUsername] != "app_g1" {
		t.Fatalf("generation 1 is %q, want app_g1", g1[KeyUsername])
	}
	prov, err := b.Provision(ctx, g1)
	if err != nil {
		t.Fatal(err)
	}
	if prov.Generation != 1 {
		t.Fatalf("provisioned generation %d, want 1", prov.Generation)
	}
	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		if err := p.CanLogin(i, "app_g1", g1[KeyPassword]); err != nil {
			t.Fatalf("app_g1 on %s: %v", i.Name, err)
		}
	}
	// What the login creates belongs to the group, not to the generation.
	c1, err := p.Connect(ctx, p.Primary, "app_g1", g1[KeyPassword], "postgres")
	if err != nil {
		t.Fatal(err)
	}
	var cur, sess string
	if err := c1.QueryRow(ctx, "SELECT current_user, session_user").Scan(&cur, &sess); err != nil {
		t.Fatal(err)
	}
	if cur != "app_owner" || sess != "app_g1" {
		t.Fatalf("a session of app_g1 acts as %s (session user %s), want app_owner", cur, sess)
	}
	if _, err := c1.Exec(ctx, "CREATE TABLE orders (id int)"); err != nil {
		t.Fatal(err)
	}
	assertOwner(t, p, "orders", "app_owner")

	// The server stores exactly the verifier rekey computed: recomputed
	// from the stored salt, it matches; the password itself never reached
	// the server's log, which records every DDL statement.
	stored := rolpassword(t, p, "app_g1")
	parts := strings.SplitN(strings.TrimPrefix(stored, "SCRAM-SHA-256$4096:"), "$", 2)
	salt, err := base64.StdEncoding.DecodeString(parts[0])
	if err != nil || !strings.HasPrefix(stored, "SCRAM-SHA-256$4096:") {
		t.Fatalf("stored verifier %q is not SCRAM-SHA-256 with 4096 iterations", stored)
	}
	if again, _ := scramVerifier(g1[KeyPassword], salt, 4096); again != stored {
		t.Fatal("the stored verifier differs from the one computed from the same password and salt")
	}
	logText, err := os.ReadFile(p.Primary.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logText), "CREATE ROLE \"app_g1\"") {
		t.Fatal("the server's log does not record the CREATE ROLE statement: the check below would prove nothing")
	}
	if strings.Contains(string(logText), g1[KeyPassword]) {
		t.Fatal("the password reached the server's log")
	}

	// Rotation: generation 2 beside generation 1.
	if err := b.Precheck(ctx, g1); err != nil {
		t.Fatal(err)
	}
	g2, _ := b.NewSecrets(2)
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	for _, s := range []engine.Secrets{g1, g2} {
		if err := p.CanLogin(p.Replica, s[KeyUsername], s[KeyPassword]); err != nil {
			t.Fatalf("during the overlap %s must log in on the replica: %v", s[KeyUsername], err)
		}
	}
	if err := b.Verify(ctx, g2); err != nil {
		t.Fatal(err)
	}
	if err := b.Verify(ctx, engine.Secrets{KeyUsername: "app_g2", KeyPassword: "wrong-password-0123456789abcdefghij"}); !isRefusal(err, reason.PendingRejected) {
		t.Fatalf("Verify with a wrong password: %v, want PendingRejected", err)
	}

	// A live session of app_g1 holds its retirement back, and is named.
	err = b.Retire(ctx, g1, g2)
	if !isRefusal(err, reason.DiscardRefused) || !strings.Contains(err.Error(), "app_g1") || !strings.Contains(err.Error(), "1 session") {
		t.Fatalf("Retire with a session open: %v, want a DiscardRefused naming it", err)
	}
	if err := p.CanLogin(p.Primary, "app_g1", g1[KeyPassword]); err != nil {
		t.Fatalf("a refused retirement must leave app_g1 working: %v", err)
	}
	c1.Close(ctx)
	waitNoSessions(t, p, "app_g1")
	if err := b.Retire(ctx, g1, g2); err != nil {
		t.Fatal(err)
	}
	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		if err := p.CanLogin(i, "app_g1", g1[KeyPassword]); err == nil {
			t.Fatalf("app_g1 still logs in on %s after retirement", i.Name)
		}
		if err := p.CanLogin(i, "app_g2", g2[KeyPassword]); err != nil {
			t.Fatalf("app_g2 on %s after retirement: %v", i.Name, err)
		}
	}
	assertOwner(t, p, "orders", "app_owner")
	if err := b.Retire(ctx, g1, g2); err != nil {
		t.Fatalf("a second Retire (after a crash) must succeed: %v", err)
	}

	// A role named like a generation that rekey did not make is refused.
	if err := p.Exec(p.Primary, "CREATE ROLE app_g3 LOGIN"); err != nil {
		t.Fatal(err)
	}
	g3, _ := b.NewSecrets(3)
	if _, err := b.Apply(ctx, g2, g3, 3); !isRefusal(err, reason.NotOwned) {
		t.Fatalf("Apply over a role made by hand: %v, want NotOwned", err)
	}
	// Another set's backend does not see this set's logins as its own.
	other := newTestBackend(t, p, "11111111-2222-4333-8444-555555555555", "app")
	if _, err := other.Apply(ctx, g2, engine.Secrets{KeyUsername: "app_g2", KeyPassword: g3[KeyPassword]}, 2); err == nil {
		t.Fatal("another set changed this set's login")
	}
	if err := p.CanLogin(p.Primary, "app_g2", g2[KeyPassword]); err != nil {
		t.Fatalf("app_g2 after another set's attempt: %v", err)
	}

	if err := b.Deprovision(ctx, g2); err != nil {
		t.Fatal(err)
	}
	if err := p.CanLogin(p.Primary, "app_g2", g2[KeyPassword]); err == nil {
		t.Fatal("app_g2 still logs in after Deprovision")
	}
	if rolpassword(t, p, "app_g3") != "" {
		t.Fatal("the hand-made app_g3 was changed")
	}
}

// TestMD5Verifier: with password_encryption md5 the verifier is the one
// the server computes itself.
func TestMD5Verifier(t *testing.T) {
	p := cluster(t)
	if err := p.Exec(p.Primary, "SET password_encryption = 'md5'; CREATE ROLE md5_user PASSWORD 'Secret0123'"); err != nil {
		t.Fatal(err)
	}
	want := rolpassword(t, p, "md5_user")
	got, err := verifier("md5", "md5_user", "Secret0123", nil)
	if err != nil || got != want {
		t.Fatalf("md5 verifier %q (%v), the server stores %q", got, err, want)
	}
}

func isRefusal(err error, r reason.Reason) bool {
	ref, ok := engine.AsRefusal(err)
	return ok && ref.Reason == string(r)
}

func rolpassword(t *testing.T, p *testenv.Postgres, role string) string {
	t.Helper()
	ctx := ctxT(t)
	c, err := p.Admin(ctx, p.Primary)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var pw *string
	if err := c.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", role).Scan(&pw); err != nil {
		t.Fatal(err)
	}
	if pw == nil {
		return ""
	}
	return *pw
}

func assertOwner(t *testing.T, p *testenv.Postgres, table, want string) {
	t.Helper()
	ctx := ctxT(t)
	c, err := p.Admin(ctx, p.Primary)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var owner string
	if err := c.QueryRow(ctx, "SELECT tableowner FROM pg_tables WHERE tablename = $1", table).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	if owner != want {
		t.Fatalf("table %s is owned by %s, want %s", table, owner, want)
	}
}

// waitNoSessions: a closed session leaves pg_stat_activity a moment later,
// on the instance it was opened on (the primary or the replica).
func waitNoSessions(t *testing.T, p *testenv.Postgres, role string) {
	t.Helper()
	ctx := ctxT(t)
	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		c, err := p.Admin(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		for {
			var n int
			if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s still has %d sessions on the %s", role, n, i.Name)
			case <-time.After(50 * time.Millisecond):
			}
		}
		c.Close(ctx)
	}
}
