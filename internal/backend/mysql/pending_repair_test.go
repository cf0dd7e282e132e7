package mysql

import (
	"context"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

func TestDecideRepair(t *testing.T) {
	missing := account{}
	creating := account{exists: true, creating: true}
	single := account{exists: true}
	dual := account{exists: true, dual: true}
	swapping := account{exists: true, dual: true, swapping: true}
	for _, tc := range []struct {
		name              string
		a                 account
		checkable         bool
		curOK, pendingOK  bool
		want              repairStep
		wantLoginAttempts bool
	}{
		{"missing: created with cur, pending retained", missing, true, false, false, repairCreate, false},
		{"missing, host-bound user too", missing, false, false, false, repairCreate, false},
		{"creation interrupted", creating, true, false, false, repairCreate, false},
		{"dual: applied, nothing to do", dual, true, false, false, repairNone, false},
		{"half-swapped: finish the swap", swapping, true, false, false, repairFinishSwap, false},
		{"half-swapped host-bound user", swapping, false, false, false, repairFinishSwap, false},
		{"cur only: retain pending", single, true, true, false, repairRetain, true},
		{"pending only (bootstrap): swap", single, true, false, true, repairSwap, true},
		{"neither: reported, untouched", single, true, false, false, repairUnknown, true},
		{"host-bound, single: cannot tell, left to discard", single, false, false, false, repairNone, false},
	} {
		if got := needsLogin(tc.a, tc.checkable); got != tc.wantLoginAttempts {
			t.Errorf("%s: needsLogin = %v, want %v", tc.name, got, tc.wantLoginAttempts)
		}
		if got := decideRepair(tc.a, tc.checkable, tc.curOK, tc.pendingOK); got != tc.want {
			t.Errorf("%s: decideRepair = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRepairPendingOnRealMySQL: while Distributed, an instance that lost
// phase 1 is brought back to accepting both passwords, whichever way it
// lost it, idempotently, without binlogging, and with super_read_only
// restored; a healthy cluster is left untouched.
func TestRepairPendingOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	f := newRepairFixture(t, c, "r")
	if _, err := f.b.Apply(ctx, f.cur, f.pending, 2); err != nil {
		t.Fatal(err)
	}
	r1, r2 := c.Replicas[0], c.Replicas[1]
	appKey, opsKey := DefaultKey(f.app), DefaultKey(f.ops)

	t.Run("nothing to repair: mysql.user unchanged on every instance", func(t *testing.T) {
		before := userRows(t, c)
		if err := f.b.RepairPending(ctx, f.cur, f.pending); err != nil {
			t.Fatal(err)
		}
		if after := userRows(t, c); after != before {
			t.Fatalf("mysql.user changed on a healthy cluster:\n%s\n%s", before, after)
		}
	})

	t.Run("rebuilt empty; one user recreated by a bootstrap with pending; another reset to cur", func(t *testing.T) {
		if err := r1.Reinit(c.Primary, testenv.ReinitOptions{Bootstrap: []string{
			"CREATE USER '" + f.app + "'@'%' IDENTIFIED BY '" + f.pending[appKey] + "'",
			"GRANT SELECT, INSERT ON app.* TO '" + f.app + "'@'%'",
		}}); err != nil {
			t.Fatal(err)
		}
		// ops on r2 lost its secondary (reset by hand to the current one).
		if err := r2.Exec("SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
			"ALTER USER '"+f.ops+"'@'%' IDENTIFIED BY '"+f.cur[opsKey]+"'",
			"ALTER USER '"+f.ops+"'@'%' DISCARD OLD PASSWORD",
			"SET GLOBAL super_read_only=ON"); err != nil {
			t.Fatal(err)
		}
		for range 2 { // idempotent: the second run changes nothing
			if err := f.b.RepairPending(ctx, f.cur, f.pending); err != nil {
				t.Fatal(err)
			}
		}
		for _, i := range c.Instances() {
			f.accepts(t, i, true, true)
		}
		assertNoBinlogDDL(t, c)
	})

	t.Run("a swap interrupted after its first statement is finished, by RepairPending or by Retire", func(t *testing.T) {
		// The state the first statement leaves: cur primary, pending
		// secondary, marked.
		half := func(i *testenv.MySQLInstance) {
			t.Helper()
			if err := i.Exec("SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
				"ALTER USER '"+f.app+"'@'%' IDENTIFIED BY '"+f.cur[appKey]+"'",
				"ALTER USER '"+f.app+"'@'%' DISCARD OLD PASSWORD",
				"ALTER USER '"+f.app+"'@'%' IDENTIFIED BY '"+f.pending[appKey]+"'",
				"ALTER USER '"+f.app+"'@'%' IDENTIFIED BY '"+f.cur[appKey]+"' RETAIN CURRENT PASSWORD ATTRIBUTE "+swappingAttribute,
				"SET GLOBAL super_read_only=ON"); err != nil {
				t.Fatal(err)
			}
		}
		half(r1)
		if err := f.b.RepairPending(ctx, f.cur, f.pending); err != nil {
			t.Fatal(err)
		}
		f.accepts(t, r1, true, true) // and no mark left
		half(r2)
		// Retire meets the half swap: DISCARD alone would keep cur only.
		if err := f.b.Retire(ctx, f.cur, f.pending); err != nil {
			t.Fatal(err)
		}
		for _, i := range c.Instances() {
			f.accepts(t, i, false, true)
		}
		assertNoBinlogDDL(t, c)
	})

	t.Run("a user that accepts neither password is reported, not touched", func(t *testing.T) {
		g := newRepairFixture(t, c, "n")
		if _, err := g.b.Apply(ctx, g.cur, g.pending, 2); err != nil {
			t.Fatal(err)
		}
		other := "typed-by-hand-0123456789abcdef"
		if err := r2.Exec("SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
			"ALTER USER '"+g.app+"'@'%' IDENTIFIED BY '"+other+"'",
			"ALTER USER '"+g.app+"'@'%' DISCARD OLD PASSWORD",
			"SET GLOBAL super_read_only=ON"); err != nil {
			t.Fatal(err)
		}
		err := g.b.RepairPending(ctx, g.cur, g.pending)
		rf, ok := engine.AsRefusal(err)
		if !ok || rf.Reason != string(reason.PendingRejected) || !strings.Contains(rf.Message, g.app+"@% on "+r2.Name) {
			t.Fatalf("RepairPending = %v, want PendingRejected naming %s on %s", err, g.app, r2.Name)
		}
		for _, pw := range []string{g.cur[DefaultKey(g.app)], g.pending[DefaultKey(g.app)], other} {
			if strings.Contains(err.Error(), pw) {
				t.Fatal("the refusal carries a password")
			}
		}
		if err := r2.CanLogin(g.app, other); err != nil {
			t.Fatalf("the user was changed: %v", err)
		}
	})
}

// userRows is every instance's mysql.user rows with their password hashes.
func userRows(t *testing.T, c *testenv.MySQLCluster) string {
	t.Helper()
	var b strings.Builder
	for _, i := range c.Instances() {
		s, err := i.QueryString("SELECT GROUP_CONCAT(CONCAT(User,'@',Host,' ',authentication_string,' ',COALESCE(CAST(User_attributes AS CHAR),'')) ORDER BY User SEPARATOR '\n') FROM mysql.user")
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(i.Name + "\n" + s + "\n")
	}
	return b.String()
}

// TestRepairPendingListedAgainOnRealMySQL: a user the spec stopped
// listing while Distributed keeps both passwords when the discard goes on
// without it; listed again, the source Secret holds a pending password
// for it alone. RepairPending then keeps both of its passwords valid
// without touching an instance that accepts them (its mark records the
// discard it missed, and setting it back to the current password first
// would refuse the other in between), gives a rebuilt instance both, and
// the other users their current password only; the reset of the
// recovery that follows leaves the current one.
func TestRepairPendingListedAgainOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	all, r2 := c.Instances(), c.Replicas[1]
	f := newRepairFixture(t, c, "l")
	appKey, opsKey := DefaultKey(f.app), DefaultKey(f.ops)
	g1, g2 := f.secretsOf("1"), f.secretsOf("2")
	if err := f.at(all, 1).Reset(ctx, g1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.at(all, 1).Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	// The discard without the app user: ops alone.
	if err := f.at(all, 1).only([]string{opsKey}).Retire(ctx, g1, g2); err != nil {
		t.Fatal(err)
	}
	cur := engine.Secrets{appKey: g1[appKey], opsKey: g2[opsKey]}
	pending := engine.Secrets{appKey: g2[appKey]}
	if m := markOf(t, c.Primary, f.app); m != `{"gen": 2, "dual": true}` {
		t.Fatalf("the app user's mark after the discard without it: %q, want the stale one", m)
	}
	row := func(i *testenv.MySQLInstance) string {
		s, err := i.QueryString("SELECT CONCAT(authentication_string, COALESCE(CAST(User_attributes AS CHAR), '')) FROM mysql.user WHERE User=? AND Host='%'", f.app)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := row(c.Primary) + row(c.Replicas[0])
	if err := r2.Reinit(c.Primary, testenv.ReinitOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second run changes nothing
		if err := f.at(all, 2).RepairPending(ctx, cur, pending); err != nil {
			t.Fatal(err)
		}
	}
	if after := row(c.Primary) + row(c.Replicas[0]); after != before {
		t.Fatalf("the app user was written where it accepts both passwords already:\n%s\n%s", before, after)
	}
	logins := func(want map[string]bool) {
		t.Helper()
		for _, i := range all {
			for who, ok := range want {
				user, pw, _ := strings.Cut(who, " ")
				if err := i.CanLogin(user, pw); (err == nil) != ok {
					t.Fatalf("%s on %s: login ok=%v, want %v (%v)", user, i.Name, err == nil, ok, err)
				}
			}
		}
	}
	logins(map[string]bool{f.app + " " + g1[appKey]: true, f.app + " " + g2[appKey]: true, f.ops + " " + g2[opsKey]: true, f.ops + " " + g1[opsKey]: false})
	assertNoBinlogDDL(t, c)

	if err := f.at(all, 2).Reset(ctx, cur); err != nil {
		t.Fatal(err)
	}
	logins(map[string]bool{f.app + " " + g1[appKey]: true, f.app + " " + g2[appKey]: false, f.ops + " " + g2[opsKey]: true, f.ops + " " + g1[opsKey]: false})
}
