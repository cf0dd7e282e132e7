package mysql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/leader"
	"rekey.io/rekey/internal/testenv"
)

func TestTermRefusal(t *testing.T) {
	cases := []struct {
		term, newest int64
		ok           bool
	}{
		{1000, 0, true},    // nothing recorded yet
		{1000, 1000, true}, // this manager's own mark (a re-run)
		{2000, 1000, true}, // an older manager's mark: this one is newer
		{1000, 2000, false},
	}
	for _, c := range cases {
		err := termRefusal(c.term, c.newest, "db-0")
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, leader.ErrNotLeader)) {
			t.Errorf("term %d, newest %d: %v, want ok=%v", c.term, c.newest, err, c.ok)
		}
	}
}

// TestTermFencingOnRealMySQL: a manager elected later (a higher term)
// applies a rotation; the older one, which checked its Lease before a
// pause and now goes on with a Reset it planned before, is refused by
// MySQL's own record: nothing changes, so consumers keep both passwords.
func TestTermFencingOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	f := newRepairFixture(t, c, "fenced")
	older, newer := *f.b, *f.b
	older.Term, newer.Term = 1_000, 2_000

	if _, err := newer.Apply(ctx, f.cur, f.pending, 2); err != nil {
		t.Fatal(err)
	}
	for _, i := range c.Instances() {
		for _, u := range []string{f.app, f.ops} {
			if got, _ := i.QueryString(`SELECT JSON_UNQUOTE(JSON_EXTRACT(ATTRIBUTE, '$."rekey.io/term"')) FROM INFORMATION_SCHEMA.USER_ATTRIBUTES WHERE USER=? AND HOST='%'`, u); got != "2000" {
				t.Fatalf("%s on %s records term %q, want 2000", u, i.Name, got)
			}
		}
	}
	for name, stale := range map[string]func() error{
		"Reset":  func() error { return older.Reset(ctx, f.cur) },
		"Apply":  func() error { _, err := older.Apply(ctx, f.cur, f.pending, 2); return err },
		"Retire": func() error { return older.Retire(ctx, f.cur, f.pending) },
	} {
		err := stale()
		if !errors.Is(err, leader.ErrNotLeader) || !strings.Contains(err.Error(), "elected later (term 2000)") {
			t.Fatalf("%s by the older manager: %v, want the term refusal", name, err)
		}
		for _, i := range c.Instances() {
			f.accepts(t, i, true, true) // and replicas are still super_read_only
		}
	}
	// A manager elected later still whose phase finds its work done (every
	// user already holds both passwords: Apply changes no password) leaves
	// its term all the same, as its session closes: the one before it is
	// refused from then on.
	newest := *f.b
	newest.Term = 3_000
	if _, err := newest.Apply(ctx, f.cur, f.pending, 2); err != nil {
		t.Fatal(err)
	}
	for _, i := range c.Instances() {
		f.accepts(t, i, true, true)
		for _, u := range []string{f.app, f.ops} {
			if got, _ := i.QueryString(`SELECT JSON_UNQUOTE(JSON_EXTRACT(ATTRIBUTE, '$."rekey.io/term"')) FROM INFORMATION_SCHEMA.USER_ATTRIBUTES WHERE USER=? AND HOST='%'`, u); got != "3000" {
				t.Fatalf("%s on %s records term %q after a phase that changed no password, want 3000", u, i.Name, got)
			}
		}
	}
	if err := newer.Reset(ctx, f.cur); !errors.Is(err, leader.ErrNotLeader) || !strings.Contains(err.Error(), "elected later (term 3000)") {
		t.Fatalf("Reset by the manager before: %v, want the term refusal", err)
	}
	// The newest manager is not held back by its own record.
	if err := newest.Reset(ctx, f.cur); err != nil {
		t.Fatal(err)
	}
	for _, i := range c.Instances() {
		f.accepts(t, i, true, false)
	}
}

// TestFenceLockOnRealMySQL: a manager frozen while it holds the set's lock
// in its session (between its check and its change) holds every other
// manager off that instance, and loses the lock once MySQL closes its
// silent session.
func TestFenceLockOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	f := newRepairFixture(t, c, "locked")
	b := *f.b
	b.Term = 3_000
	defer func(w, idle time.Duration) { lockWait, heldIdle = w, idle }(lockWait, heldIdle)
	lockWait = time.Second

	db, err := c.Replicas[0].DB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	frozen, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	// What a fenced session of a manager that then froze leaves behind.
	if _, err := frozen.ExecContext(ctx, "SET SESSION wait_timeout=2"); err != nil {
		t.Fatal(err)
	}
	var got int
	if err := frozen.QueryRowContext(ctx, "SELECT GET_LOCK(?, 1)", lockName(b.owner)).Scan(&got); err != nil || got != 1 {
		t.Fatalf("take the set's lock: %d, %v", got, err)
	}

	_, err = b.Apply(ctx, f.cur, f.pending, 2)
	if err == nil || !strings.Contains(err.Error(), "another rekey manager is changing this set's users on "+c.Replicas[0].Name) {
		t.Fatalf("Apply while another session holds the lock: %v, want it held off", err)
	}
	f.accepts(t, c.Replicas[0], true, false)

	// MySQL closes the frozen session after its wait_timeout; the next
	// attempt goes through.
	waitFor(t, "the frozen session's lock released by MySQL", func() bool {
		_, err := b.Apply(ctx, f.cur, f.pending, 2)
		return err == nil
	})
	for _, i := range c.Instances() {
		f.accepts(t, i, true, true)
	}
}

// TestRepairAsksTheFenceOnRealMySQL: a repair is decided outside the
// engine's sequence, from the status as read; it asks the fence (which
// then also confirms that status) before the session that writes, so a
// refusal leaves the instance as it was, and the repair goes on once the
// fence lets it.
func TestRepairAsksTheFenceOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	f := newRepairFixture(t, c, "gated")
	if _, err := f.b.Apply(ctx, f.cur, f.pending, 2); err != nil {
		t.Fatal(err)
	}
	r := c.Replicas[0]
	f.dropUnlogged(t, r, f.app, f.ops) // rebuilt empty mid-rotation
	stale := errors.New("the set moved on since it was read")
	gated := *f.b
	asked := 0
	gated.Fence = func(context.Context) error { asked++; return stale }
	if err := gated.RepairPending(ctx, f.cur, f.pending); !errors.Is(err, stale) {
		t.Fatalf("RepairPending behind a refusing fence: %v, want its refusal", err)
	}
	if asked == 0 {
		t.Fatal("the fence was never asked")
	}
	for _, u := range []string{f.app, f.ops} {
		if r.CanLogin(u, f.cur[DefaultKey(u)]) == nil {
			t.Fatalf("%s was recreated on %s behind a refusing fence", u, r.Name)
		}
	}
	asked = 0
	gated.Fence = func(context.Context) error { asked++; return nil }
	if err := gated.RepairPending(ctx, f.cur, f.pending); err != nil {
		t.Fatal(err)
	}
	f.accepts(t, r, true, true)
	// Nothing left to repair: the fence is not asked (it costs a request).
	asked = 0
	if err := gated.RepairPending(ctx, f.cur, f.pending); err != nil || asked != 0 {
		t.Fatalf("RepairPending with nothing to repair: %v, fence asked %d times", err, asked)
	}
}
