package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestReplicaGate: a replica that has not replayed a role change holds the
// rotation back (no password is proven, so none is given out) and the
// phase goes on once it has; an abort (Reset) drops the new login and
// keeps the current one working everywhere.
func TestReplicaGate(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	b := newTestBackend(t, p, testUID, "gate")
	g1, _ := b.NewSecrets(1)
	if _, err := b.Provision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	// A real fault on demand: the replica stops replaying WAL.
	if err := p.Exec(p.Replica, "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	b.ReplayWait = time.Second
	g2, _ := b.NewSecrets(2)
	_, err := b.Apply(ctx, g1, g2, 2)
	u, ok := engine.AsUnreachable(err)
	if !ok || u.Instance != p.Replica.Addr() || !strings.Contains(err.Error(), "replayed") {
		t.Fatalf("Apply while the replica does not replay: %v, want the replica named as not having replayed", err)
	}
	if err := p.CanLogin(p.Replica, "gate_g2", g2[KeyPassword]); err == nil {
		t.Fatal("the paused replica already knows gate_g2: the check above proved nothing")
	}
	if err := p.Exec(p.Replica, "SELECT pg_wal_replay_resume()"); err != nil {
		t.Fatal(err)
	}
	b.ReplayWait = DefaultReplayWait
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.CanLogin(p.Replica, "gate_g2", g2[KeyPassword]); err != nil {
		t.Fatalf("gate_g2 on the replica once it replayed: %v", err)
	}

	if err := b.Reset(ctx, g1); err != nil {
		t.Fatal(err)
	}
	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		if err := p.CanLogin(i, "gate_g1", g1[KeyPassword]); err != nil {
			t.Fatalf("gate_g1 on %s after Reset: %v", i.Name, err)
		}
	}
	if roleExists(t, p, "gate_g2") {
		t.Fatal("gate_g2 is left after Reset")
	}
}

func roleExists(t *testing.T, p *testenv.Postgres, role string) bool {
	t.Helper()
	ok, err := p.RoleExists(role)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestAdoption: an existing login role that owns the application's table
// becomes generation 1 with the password applications hold; the table
// passes to the group, so the adopted role's sessions and the next
// generation both reach it; a wrong password adopts nothing; the adopted
// role is dropped when the first rotation completes.
func TestAdoption(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	if err := p.Exec(p.Primary, "CREATE ROLE legacy LOGIN PASSWORD 'Legacy0123456789'",
		"GRANT CREATE ON SCHEMA public TO legacy", "SET ROLE legacy; CREATE TABLE ledger (n int); INSERT INTO ledger VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	assertOwner(t, p, "ledger", "legacy")
	spec := &v1.PostgresSpec{
		Hosts: []string{p.Primary.Addr(), p.Replica.Addr()},
		Login: v1.PostgresLogin{Base: "shop", Group: "app_owner"},
		Adopt: &v1.PostgresAdopt{Role: "legacy"},
	}
	b, err := New(spec, testUID, p.AdminUser, p.AdminPassword, p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ProveAdoption(ctx, "shop", "wrong-password-0123"); !isRefusal(err, reason.ProvisionFailed) || !strings.Contains(err.Error(), "does not log in as role legacy") {
		t.Fatalf("adoption with a wrong password: %v, want a ProvisionFailed refusal", err)
	}
	if roleComment(t, p, "legacy") != "" {
		t.Fatal("a refused adoption changed the role")
	}
	if err := b.ProveAdoption(ctx, "shop", "Legacy0123456789"); err != nil {
		t.Fatal(err)
	}
	// A session of the application, open before the adoption, keeps
	// working on its table.
	live, err := p.Connect(ctx, p.Primary, "legacy", "Legacy0123456789", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close(ctx)
	g1 := engine.Secrets{KeyUsername: "legacy", KeyPassword: "Legacy0123456789"}
	got, err := b.Provision(ctx, g1)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Adopted || got.Generation != 1 || got.Secrets[KeyUsername] != "legacy" {
		t.Fatalf("Provision adopted %+v", got)
	}
	assertOwner(t, p, "ledger", "app_owner")
	if _, err := live.Exec(ctx, "INSERT INTO ledger VALUES (2)"); err != nil {
		t.Fatalf("the adopted role's open session lost its table: %v", err)
	}
	if err := p.CanLogin(p.Replica, "legacy", "Legacy0123456789"); err != nil {
		t.Fatalf("legacy on the replica after adoption: %v", err)
	}

	if err := b.Precheck(ctx, g1); err != nil {
		t.Fatal(err)
	}
	g2, _ := b.NewSecrets(2)
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	c2, err := p.Connect(ctx, p.Primary, "shop_g2", g2[KeyPassword], "postgres")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := c2.QueryRow(ctx, "SELECT count(*) FROM ledger").Scan(&n); err != nil || n != 2 {
		t.Fatalf("shop_g2 reads %d rows of the adopted role's table (%v), want 2", n, err)
	}
	c2.Close(ctx)
	live.Close(ctx)
	waitNoSessions(t, p, "legacy")
	if err := b.Retire(ctx, g1, g2); err != nil {
		t.Fatal(err)
	}
	if roleExists(t, p, "legacy") {
		t.Fatal("the adopted role is left after the first rotation completed")
	}
	assertOwner(t, p, "ledger", "app_owner")
}

func roleComment(t *testing.T, p *testenv.Postgres, role string) string {
	t.Helper()
	ctx := ctxT(t)
	c, err := p.Admin(ctx, p.Primary)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var s string
	if err := c.QueryRow(ctx, "SELECT COALESCE(shobj_description(oid, 'pg_authid'), '') FROM pg_roles WHERE rolname = $1", role).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTerminateSessions: with terminateSessions the old login's sessions,
// on the primary and the replica, are ended instead of waited for, and the
// role is dropped.
func TestTerminateSessions(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	spec := &v1.PostgresSpec{Hosts: []string{p.Primary.Addr(), p.Replica.Addr()},
		Login: v1.PostgresLogin{Base: "term", Group: "app_owner"}, TerminateSessions: true}
	b, err := New(spec, testUID, p.AdminUser, p.AdminPassword, p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	g1, _ := b.NewSecrets(1)
	if _, err := b.Provision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	g2, _ := b.NewSecrets(2)
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	var open []*pgx.Conn
	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		c, err := p.Connect(ctx, i, "term_g1", g1[KeyPassword], "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		open = append(open, c)
	}
	if err := b.Retire(ctx, g1, g2); err != nil {
		t.Fatal(err)
	}
	for _, c := range open {
		if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
			t.Fatal("a session of the retired login still runs")
		}
	}
	if roleExists(t, p, "term_g1") {
		t.Fatal("term_g1 is left")
	}
}

// TestTopologyRefusals: an instance that does not answer stops the phase
// naming it, a list with two primaries (or none) is refused, and in each
// case nothing is created.
func TestTopologyRefusals(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	closed, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf("127.0.0.1:%d", closed)
	localhost := fmt.Sprintf("localhost:%d", p.Primary.Port) // the primary again, by another name
	replica := p.Replica.Addr()
	for _, c := range []struct {
		name  string
		hosts []string
		check func(error) bool
	}{
		{"an instance down", []string{p.Primary.Addr(), down}, func(err error) bool {
			u, ok := engine.AsUnreachable(err)
			return ok && u.Instance == down
		}},
		{"two primaries", []string{p.Primary.Addr(), localhost}, func(err error) bool {
			return isRefusal(err, reason.ClusterUnhealthy) && strings.Contains(err.Error(), "primaries")
		}},
		{"no primary", []string{replica}, func(err error) bool {
			return isRefusal(err, reason.ClusterUnhealthy) && strings.Contains(err.Error(), "none of")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := New(&v1.PostgresSpec{Hosts: c.hosts, Login: v1.PostgresLogin{Base: "topo", Group: "app_owner"}},
				testUID, p.AdminUser, p.AdminPassword, p.CAPEM)
			if err != nil {
				t.Fatal(err)
			}
			g1, _ := b.NewSecrets(1)
			if _, err := b.Provision(ctx, g1); !c.check(err) {
				t.Fatalf("Provision: %v", err)
			}
			if roleExists(t, p, "topo_g1") {
				t.Fatal("a refused Provision created topo_g1")
			}
		})
	}
}
