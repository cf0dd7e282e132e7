package postgres

import (
	"strings"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// The decisions the explorer's PostgreSQL model with several logins
// (internal/explorer, pglogins.go) encodes that TestSeveralLogins does not
// show on a real primary and replica.

// newLoginsBackend is a set of two logins, <prefix>_app in app_owner and
// <prefix>_rep in group, with terminateSessions as given.
func newLoginsBackend(t *testing.T, prefix, group string, terminate bool) *Backend {
	t.Helper()
	p := cluster(t)
	if err := p.Exec(p.Primary, "CREATE ROLE "+group+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	spec := &v1.PostgresSpec{Hosts: []string{p.Primary.Addr(), p.Replica.Addr()}, TerminateSessions: terminate,
		Logins: []v1.PostgresLogin{{Base: prefix + "_app", Group: "app_owner"}, {Base: prefix + "_rep", Group: group}}}
	b, err := New(spec, testUID, p.AdminUser, p.AdminPassword, p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestModelLoginsOneByOne: Retire drops the old logins in the spec's
// order, each once no session uses it: a session of the second login's
// old role leaves the first's dropped and the second's kept
// (DiscardRefused naming it); the Retire repeated once the session ended
// finds the first gone and drops the second. Release with two logins
// drops every other generation of each and takes the set's mark off both
// current logins, which keep their passwords.
func TestModelLoginsOneByOne(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	b := newLoginsBackend(t, "mlo", "mlo_reader", false)
	g1, _ := b.NewSecrets(1)
	g2, _ := b.NewSecrets(2)
	g3, _ := b.NewSecrets(3)
	if _, err := b.Provision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	c, err := p.Connect(ctx, p.Replica, "mlo_rep_g1", g1["mlo_rep.password"], "postgres")
	if err != nil {
		t.Fatal(err)
	}
	err = b.Retire(ctx, g1, g2)
	if !isRefusal(err, reason.DiscardRefused) || !strings.Contains(err.Error(), "mlo_rep_g1") {
		t.Fatalf("Retire with a session of mlo_rep_g1: %v, want DiscardRefused naming it", err)
	}
	if roleExists(t, p, "mlo_app_g1") || !roleExists(t, p, "mlo_rep_g1") {
		t.Fatal("Retire refused for the second login must have dropped the first's old role and kept the second's")
	}
	c.Close(ctx)
	waitNoSessions(t, p, "mlo_rep_g1")
	if err := b.Retire(ctx, g1, g2); err != nil {
		t.Fatalf("Retire again once the session ended: %v", err)
	}
	if roleExists(t, p, "mlo_rep_g1") {
		t.Fatal("mlo_rep_g1 is left after the repeated Retire")
	}

	// An interrupted rotation's roles, then the deletion (Discard).
	if _, err := b.Apply(ctx, g2, g3, 3); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, engine.Secrets{"mlo_app.username": "mlo_app_g2", "mlo_app.password": g2["mlo_app.password"]}); !isRefusal(err, reason.KeyMismatch) || !strings.Contains(err.Error(), "mlo_rep.username") {
		t.Fatalf("Release without the second login's current role: %v, want KeyMismatch naming mlo_rep.username", err)
	}
	if !roleExists(t, p, "mlo_app_g3") {
		t.Fatal("a refused Release dropped a role")
	}
	if err := b.Release(ctx, g2); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"mlo_app_g3", "mlo_rep_g3"} {
		if roleExists(t, p, r) {
			t.Fatalf("Release left %s", r)
		}
	}
	assertLogins(t, p, g2, "mlo_app_g2", "mlo_rep_g2")
	for _, r := range []string{"mlo_app_g2", "mlo_rep_g2"} {
		if c := roleComment(t, p, r); c != "" {
			t.Errorf("%s still carries %q after Release", r, c)
		}
	}
}

// TestModelTerminateAwaitsReplay: with terminateSessions a drop first
// stops the role from logging in (NOLOGIN, on the primary), waits for the
// replicas to replay that, and only then ends its sessions: while the
// replica's replay is paused, Retire stops Unreachable naming the replica,
// the old role still exists, refuses a login on the primary, still logs
// in on the paused replica, and its open session still runs; once the
// replay resumes, Retire ends the session and drops the role. A
// deletion's drop (Deprovision) ends the sessions of the current login
// too, instead of refusing (UsersInUse) while one uses it.
func TestModelTerminateAwaitsReplay(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	spec := &v1.PostgresSpec{Hosts: []string{p.Primary.Addr(), p.Replica.Addr()},
		Login: v1.PostgresLogin{Base: "mtr", Group: "app_owner"}, TerminateSessions: true}
	b, err := New(spec, testUID, p.AdminUser, p.AdminPassword, p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	g1, _ := b.NewSecrets(1)
	g2, _ := b.NewSecrets(2)
	if _, err := b.Provision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	c1, err := p.Connect(ctx, p.Primary, "mtr_g1", g1[KeyPassword], "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close(ctx)
	if err := p.Exec(p.Replica, "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := p.Exec(p.Replica, "SELECT pg_wal_replay_resume()"); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(resume)
	b.ReplayWait = time.Second
	err = b.Retire(ctx, g1, g2)
	if u, ok := engine.AsUnreachable(err); !ok || u.Instance != p.Replica.Addr() || !strings.Contains(err.Error(), "replayed") {
		t.Fatalf("Retire with terminateSessions while the replica does not replay: %v, want the replica named as not having replayed", err)
	}
	if !roleExists(t, p, "mtr_g1") {
		t.Fatal("mtr_g1 was dropped before the replica replayed its NOLOGIN")
	}
	if err := p.CanLogin(p.Primary, "mtr_g1", g1[KeyPassword]); err == nil {
		t.Fatal("mtr_g1 still logs in on the primary after Retire made it NOLOGIN")
	}
	if err := p.CanLogin(p.Replica, "mtr_g1", g1[KeyPassword]); err != nil {
		t.Fatalf("the paused replica must still let mtr_g1 in (NOLOGIN not replayed yet): %v", err)
	}
	if _, err := c1.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the session of mtr_g1 was ended before the replay: %v", err)
	}
	resume()
	b.ReplayWait = DefaultReplayWait
	if err := b.Retire(ctx, g1, g2); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("the session of the retired mtr_g1 still runs")
	}
	if roleExists(t, p, "mtr_g1") {
		t.Fatal("mtr_g1 is left after Retire")
	}

	c2, err := p.Connect(ctx, p.Replica, "mtr_g2", g2[KeyPassword], "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	if err := b.Deprovision(ctx, g2); err != nil {
		t.Fatalf("Deprovision with terminateSessions and a session of the current login: %v", err)
	}
	if _, err := c2.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("the session of mtr_g2 still runs after Deprovision")
	}
	if roleExists(t, p, "mtr_g2") {
		t.Fatal("mtr_g2 is left after Deprovision")
	}
}
