package mysql

import (
	"context"
	"testing"

	"rekey.io/rekey/internal/testenv"
)

// TestRetireInstanceThatMissedPhase1OnRealMySQL: an
// instance that phase 1 never reached (it joined the set after Apply, or
// was cloned from a donor that had not applied it) holds every user with
// the current password only and no secondary. Retire must not DISCARD
// there (a no-op that leaves consumers holding the new password refused):
// it retains pending first, then discards, so the instance ends like the
// others — the new password only.
func TestRetireInstanceThatMissedPhase1OnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	f := newRepairFixture(t, c, "m")
	missed := c.Replicas[1]
	// Phase 1 on every instance but the last: the backend of a set that
	// did not list it yet.
	early := *f.b
	early.Instances = f.b.Instances[:len(f.b.Instances)-1]
	for _, i := range early.Instances {
		if i.Addr == missed.Addr() {
			t.Fatal("fixture: the instance that misses phase 1 is still listed")
		}
	}
	if _, err := early.Apply(ctx, f.cur, f.pending, 2); err != nil {
		t.Fatal(err)
	}
	f.accepts(t, missed, true, false) // missed phase 1
	for _, i := range []*testenv.MySQLInstance{c.Primary, c.Replicas[0]} {
		f.accepts(t, i, true, true)
	}
	for range 2 { // a re-run after a crash finds it done
		if err := f.b.Retire(ctx, f.cur, f.pending); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range c.Instances() {
		f.accepts(t, i, false, true)
		for _, u := range []string{f.app, f.ops} {
			if dual, _ := i.QueryString("SELECT JSON_CONTAINS_PATH(COALESCE(User_attributes, '{}'), 'one', '$.additional_password') FROM mysql.user WHERE User=? AND Host='%'", u); dual != "0" {
				t.Fatalf("%s on %s still has a secondary password after Retire", u, i.Name)
			}
		}
	}
	assertNoBinlogDDL(t, c)
}
