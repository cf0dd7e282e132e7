package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/leader"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

func TestParseMark(t *testing.T) {
	for _, c := range []struct {
		comment, mark string
		term          int64
	}{
		{ownerMark(testUID), ownerMark(testUID), 0},
		{markTerm(testUID, 1732871234567890), ownerMark(testUID), 1732871234567890},
		{ownerMark(testUID) + " term=x", ownerMark(testUID) + " term=x", 0},
		{ownerMark(testUID) + " term=-4", ownerMark(testUID) + " term=-4", 0},
		{"the payments team's login", "the payments team's login", 0},
		{"", "", 0},
	} {
		if mark, term := parseMark(c.comment); mark != c.mark || term != c.term {
			t.Errorf("parseMark(%q) = %q, %d; want %q, %d", c.comment, mark, term, c.mark, c.term)
		}
	}
	if markTerm(testUID, 0) != ownerMark(testUID) {
		t.Error("a manager without a term must write the plain mark")
	}
}

func TestTermRefusal(t *testing.T) {
	for _, c := range []struct {
		term, newest int64
		refused      bool
	}{{5, 0, false}, {5, 5, false}, {5, 4, false}, {5, 6, true}} {
		err := termRefusal(c.term, c.newest)
		if (err != nil) != c.refused || (err != nil && !errors.Is(err, leader.ErrNotLeader)) {
			t.Errorf("termRefusal(%d, %d) = %v, refused want %v", c.term, c.newest, err, c.refused)
		}
	}
}

// TestTermFencingOnRealPostgres: the leadership term is recorded on the
// set's roles in the transaction that changes them, and a manager whose
// term is older than the one recorded (a leader that stalled past its
// Lease and woke up after the next one acted) is refused at the server —
// its rotate, discard, reset and release change nothing, and every login
// consumers hold still works — while the current leader and a later one
// proceed. A transaction of another manager holding the set's lock keeps
// the backend off until it ends.
func TestTermFencingOnRealPostgres(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	const uid = "7f3e2d1c-0b9a-4876-a5b4-c3d2e1f0a9b8"
	at := func(term int64) *Backend {
		b := newTestBackend(t, p, uid, "fen")
		b.Term = term
		return b
	}
	current, stale, later := at(200), at(100), at(300)
	g1, _ := current.NewSecrets(1)
	g2, _ := current.NewSecrets(2)
	if _, err := current.Provision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	wantComment(t, p, "fen_g1", markTerm(uid, 200))
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, leader.ErrNotLeader) || !strings.Contains(err.Error(), "elected later (term 200)") {
			t.Fatalf("%s by a manager with an older term: %v, want the term's refusal", what, err)
		}
	}

	_, err := stale.Apply(ctx, g1, g2, 2)
	refused("rotate", err)
	if roleExists(t, p, "fen_g2") {
		t.Fatal("the refused rotate created fen_g2")
	}
	wantComment(t, p, "fen_g1", markTerm(uid, 200))

	if _, err := current.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatalf("rotate by the current leader: %v", err)
	}
	wantComment(t, p, "fen_g2", markTerm(uid, 200))
	refused("discard", stale.Retire(ctx, g1, g2))
	refused("reset", stale.Reset(ctx, g1))
	// A stale reset that woke after repairing the current login goes on
	// to drop fen_g2 while a client of it is logged in: it hears the
	// term's refusal, not that the role is in use (which would send a
	// person after a client, for a set this manager no longer leads).
	client, err := p.Connect(ctx, p.Primary, "fen_g2", g2[KeyPassword], "postgres")
	if err != nil {
		t.Fatal(err)
	}
	top, err := stale.topology(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refused("reset's drop of a login in use", stale.removeGenerations(ctx, top, stale.logins[0], reason.AbortSkipped, g1[KeyUsername]))
	top.close(ctx)
	if err := client.Close(ctx); err != nil {
		t.Fatal(err)
	}
	refused("release", stale.Release(ctx, g2))
	for _, l := range []struct{ role, pw string }{{"fen_g1", g1[KeyPassword]}, {"fen_g2", g2[KeyPassword]}} {
		if err := p.CanLogin(p.Primary, l.role, l.pw); err != nil {
			t.Fatalf("%s after the stale manager's attempts: %v", l.role, err)
		}
		wantComment(t, p, l.role, markTerm(uid, 200))
	}

	// A later leader proceeds and records its term.
	if err := later.Retire(ctx, g1, g2); err != nil {
		t.Fatalf("discard by a later leader: %v", err)
	}
	if roleExists(t, p, "fen_g1") {
		t.Fatal("the later leader's discard left fen_g1")
	}
	wantComment(t, p, "fen_g2", markTerm(uid, 300))
	refused200 := current.Reset(ctx, g2)
	if !errors.Is(refused200, leader.ErrNotLeader) {
		t.Fatalf("reset by the leader before the later one: %v, want the term's refusal", refused200)
	}

	// Another manager's transaction holds the set's lock: the backend
	// waits lockWait, then gives up without changing anything.
	defer func(w time.Duration) { lockWait = w }(lockWait)
	lockWait = time.Second
	holder, err := p.Admin(ctx, p.Primary)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(uid)); err != nil {
		t.Fatal(err)
	}
	if err := later.Reset(ctx, g2); err == nil || !strings.Contains(err.Error(), "another rekey manager") {
		t.Fatalf("reset while another transaction holds the set's lock: %v, want a retry later", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := later.Reset(ctx, g2); err != nil {
		t.Fatalf("reset once the lock is free: %v", err)
	}
	if err := p.CanLogin(p.Replica, "fen_g2", g2[KeyPassword]); err != nil {
		t.Fatal(err)
	}
	if err := later.Deprovision(ctx, g2); err != nil {
		t.Fatal(err)
	}
}

func wantComment(t *testing.T, p *testenv.Postgres, role, want string) {
	t.Helper()
	if got := roleComment(t, p, role); got != want {
		t.Fatalf("role %s carries %q, want %q", role, got, want)
	}
}
