package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// TestModelFailover: what the explorer's PostgreSQL world with a failover
// (internal/explorer, pgfailover.go) encodes, on a primary and replica of
// its own (it crashes and promotes them). A drop is done only once every
// replica has replayed it: with the replica's WAL receiver stopped
// (asynchronous replication lagging), Retire drops the retired login on
// the primary and stops Unreachable naming the replica, so the discard is
// not recorded done. The primary not answering stops every step, naming
// it, before and after the replica's promotion (every instance listed must
// answer). The replica promoted without the WAL it had not received lets
// the retired login in again; the old primary cloned onto the promoted one
// as its replica, the backend finds the promoted primary by asking, and
// Retire taken again drops the login there and waits for the old
// primary's replay. A replica whose replay is paused stops Retire too, and
// promoted has everything it received. (Before, Retire returned once the
// primary had dropped the login, and the promotion brought it back, with
// its password and the set's mark, while the set read Idle.)
func TestModelFailover(t *testing.T) {
	p := testenv.PostgresForTest(t)
	ctx := ctxT(t)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("the group", p.Exec(p.Primary, "CREATE ROLE app_owner NOLOGIN"))
	b := newTestBackend(t, p, testUID, "mfo")
	var g [4]engine.Secrets
	for i := 1; i <= 3; i++ {
		g[i], _ = b.NewSecrets(int64(i))
	}
	_, err := b.Provision(ctx, g[1])
	must("Provision", err)
	_, err = b.Apply(ctx, g[1], g[2], 2)
	must("Apply", err)

	// The replica stops receiving the primary's WAL (asynchronous
	// replication lagging, for as long as it lasts), and the discard drops
	// mfo_g1 on the primary.
	must("stop the replica's WAL receiver", p.Exec(p.Replica, "ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()"))
	waitFor(t, "the replica's WAL receiver to stop", func() bool { return count(t, p, p.Replica, "SELECT count(*) FROM pg_stat_wal_receiver") == "0" })
	b.ReplayWait = 2 * time.Second
	unreplayed := func(what string, err error, replica *testenv.PostgresInstance) {
		t.Helper()
		if u, ok := engine.AsUnreachable(err); !ok || u.Instance != replica.Addr() || !strings.Contains(err.Error(), "has not replayed") {
			t.Fatalf("%s: %v, want Unreachable naming %s, which has not replayed the drop", what, err, replica.Addr())
		}
	}
	unreplayed("Retire with the replica's WAL receiver stopped", b.Retire(ctx, g[1], g[2]), p.Replica)
	if logsIn(p, p.Primary, "mfo_g1", g[1]) {
		t.Fatal("mfo_g1 still logs in on the primary after Retire")
	}

	// The primary crashes: every step stops, naming it.
	must("kill the primary", p.Kill(p.Primary))
	unreachable := func(when string) {
		t.Helper()
		err := b.RepairIdle(ctx, g[2])
		if u, ok := engine.AsUnreachable(err); !ok || u.Instance != p.Primary.Addr() {
			t.Fatalf("upkeep %s: %v, want Unreachable naming the old primary %s", when, err, p.Primary.Addr())
		}
	}
	unreachable("with the primary down")

	// The replica promoted without the drop it never received.
	must("promote the replica", p.Promote(p.Replica))
	unreachable("after the promotion, the old primary still down")
	if !logsIn(p, p.Replica, "mfo_g1", g[1]) {
		t.Fatal("the promoted replica does not let mfo_g1 in: the drop it never received reached it")
	}
	if c := comment(t, p, p.Replica, "mfo_g1"); !strings.HasPrefix(c, ownerMark(testUID)) {
		t.Fatalf("mfo_g1 on the promoted replica carries %q, want the set's mark", c)
	}

	// The old primary cloned onto the promoted one, as its replica: the
	// discard, not recorded done, is taken again there.
	must("rejoin the old primary", p.Rejoin(p.Primary, p.Replica))
	b = newTestBackend(t, p, testUID, "mfo") // its port may have changed
	b.ReplayWait = 2 * time.Second
	must("Retire again, on the promoted primary", b.Retire(ctx, g[1], g[2]))
	for _, i := range []*testenv.PostgresInstance{p.Replica, p.Primary} {
		if logsIn(p, i, "mfo_g1", g[1]) {
			t.Fatalf("mfo_g1 still logs in on the %s after Retire on the promoted primary", i.Name)
		}
	}
	_, err = b.Apply(ctx, g[2], g[3], 3)
	must("Apply on the promoted primary", err)
	for _, i := range []*testenv.PostgresInstance{p.Replica, p.Primary} {
		if !logsIn(p, i, "mfo_g3", g[3]) {
			t.Fatalf("mfo_g3 does not log in on the %s after Apply", i.Name)
		}
	}

	// Failover back, the new replica's replay paused: it has received the
	// drop of mfo_g2, not replayed it; promoted, it has.
	must("pause the replay", p.Exec(p.Primary, "SELECT pg_wal_replay_pause()"))
	unreplayed("Retire with the replica's replay paused", b.Retire(ctx, g[2], g[3]), p.Primary)
	lsn := text(t, p, p.Replica, "SELECT pg_current_wal_lsn()::text")
	waitFor(t, "the paused replica to receive the drop", func() bool {
		return text(t, p, p.Primary, "SELECT (pg_last_wal_receive_lsn() >= '"+lsn+"'::pg_lsn)::text") == "true"
	})
	if !logsIn(p, p.Primary, "mfo_g2", g[2]) {
		t.Fatal("the paused replica does not let mfo_g2 in: it replayed the drop")
	}
	must("kill the promoted primary", p.Kill(p.Replica))
	must("promote the paused replica", p.Promote(p.Primary))
	if logsIn(p, p.Primary, "mfo_g2", g[2]) {
		t.Fatal("the paused replica, promoted, still lets mfo_g2 in: it did not replay what it received")
	}
	if !logsIn(p, p.Primary, "mfo_g3", g[3]) {
		t.Fatal("mfo_g3 does not log in on the promoted replica")
	}
}

func logsIn(p *testenv.Postgres, i *testenv.PostgresInstance, role string, s engine.Secrets) bool {
	return p.CanLogin(i, role, s[KeyPassword]) == nil
}

func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !done(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

func text(t *testing.T, p *testenv.Postgres, i *testenv.PostgresInstance, query string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := p.Admin(ctx, i)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var s string
	if err := c.QueryRow(ctx, query).Scan(&s); err != nil {
		t.Fatalf("%s on the %s: %v", query, i.Name, err)
	}
	return s
}

func count(t *testing.T, p *testenv.Postgres, i *testenv.PostgresInstance, query string) string {
	t.Helper()
	return text(t, p, i, "SELECT ("+query+")::text")
}

func comment(t *testing.T, p *testenv.Postgres, i *testenv.PostgresInstance, role string) string {
	t.Helper()
	return text(t, p, i, "SELECT COALESCE(shobj_description(oid, 'pg_authid'), '') FROM pg_roles WHERE rolname = '"+role+"'")
}
