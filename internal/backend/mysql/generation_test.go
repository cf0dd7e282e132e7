package mysql

import (
	"context"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// secretsOf are each user's password of generation gen.
func (f *repairFixture) secretsOf(gen string) engine.Secrets {
	out := engine.Secrets{}
	for _, u := range []string{f.app, f.ops} {
		out[DefaultKey(u)] = u + "-generation-" + gen + "-0123456789abcdef"
	}
	return out
}

// at makes a backend for f's users over insts, built as the set's status
// says: current generation gen, its rotation producing gen+1.
func (f *repairFixture) at(insts []*testenv.MySQLInstance, gen int64) *Backend {
	b := *f.b
	b.Instances = nil
	for _, i := range insts {
		b.Instances = append(b.Instances, Instance{Name: i.Name, Addr: i.Addr()})
	}
	b.Gen, b.Target = gen, gen+1
	return &b
}

// logins asserts, for every user on inst, which of the generations' passwords log in.
func (f *repairFixture) logins(t *testing.T, inst *testenv.MySQLInstance, want map[string]bool) {
	t.Helper()
	for gen, ok := range want {
		for k, pw := range f.secretsOf(gen) {
			if err := inst.CanLogin(strings.ToLower(strings.TrimSuffix(k, "_PASSWORD")), pw); (err == nil) != ok {
				t.Fatalf("%s on %s with generation %s's password: login ok=%v, want %v (%v)", k, inst.Name, gen, err == nil, ok, err)
			}
		}
	}
}

func markOf(t *testing.T, inst *testenv.MySQLInstance, user string) string {
	t.Helper()
	m, err := inst.QueryString("SELECT COALESCE(CAST(JSON_EXTRACT(User_attributes, "+appliedPath+") AS CHAR), '') FROM mysql.user WHERE User=? AND Host='%'", user)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestIdleRepairOnRealMySQL: each phase marks the users with the
// generation it applied, in its own statements; an instance that left the
// set (a StatefulSet scaled in) while Idle and returned after a rotation,
// or left while Distributed and missed the discard, is set back to the
// current passwords by the Idle upkeep, which asks the fence before it
// writes and writes nothing when nothing is wrong; one rebuilt empty gets
// its users back; a second password by hand is reported, never changed.
func TestIdleRepairOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	all := c.Instances()
	r2 := c.Replicas[1]
	kept := []*testenv.MySQLInstance{c.Primary, c.Replicas[0]}
	f := newRepairFixture(t, c, "g") // users created with cur, unmarked
	g1 := f.secretsOf("1")
	// Generation 1 everywhere, marked as Reset marks it.
	if err := f.at(all, 1).Reset(ctx, g1); err != nil {
		t.Fatal(err)
	}
	if m := markOf(t, r2, f.app); m != `{"gen": 1, "dual": false}` {
		t.Fatalf("mark after Reset: %q", m)
	}

	fences := 0
	fenced := func(b *Backend) *Backend {
		b.Fence = func(context.Context) error { fences++; return nil }
		return b
	}
	t.Run("nothing wrong: nothing written, no fence asked", func(t *testing.T) {
		before := userRows(t, c)
		if err := fenced(f.at(all, 1)).RepairIdle(ctx, g1); err != nil {
			t.Fatal(err)
		}
		if after := userRows(t, c); after != before || fences != 0 {
			t.Fatalf("an Idle upkeep with nothing wrong wrote (fence asked %d times):\n%s\n%s", fences, before, after)
		}
	})

	t.Run("scaled in while Idle, the set rotated without it, scaled back: set to the current passwords", func(t *testing.T) {
		b := f.at(kept, 1)
		if _, err := b.Apply(ctx, g1, f.secretsOf("2"), 2); err != nil {
			t.Fatal(err)
		}
		if m := markOf(t, c.Primary, f.app); m != `{"gen": 2, "dual": true}` {
			t.Fatalf("mark after Apply: %q", m)
		}
		if err := b.Retire(ctx, g1, f.secretsOf("2")); err != nil {
			t.Fatal(err)
		}
		if m := markOf(t, c.Primary, f.app); m != `{"gen": 2, "dual": false}` {
			t.Fatalf("mark after Retire: %q", m)
		}
		f.logins(t, r2, map[string]bool{"1": true, "2": false}) // what it returns with
		for range 2 {
			if err := fenced(f.at(all, 2)).RepairIdle(ctx, f.secretsOf("2")); err != nil {
				t.Fatal(err)
			}
		}
		for _, i := range all {
			f.logins(t, i, map[string]bool{"1": false, "2": true})
		}
		// One instance written, once: the fence before its session, and
		// again under the set's lock in it (fence.go).
		if fences != 2 {
			t.Fatalf("fence asked %d times, want 2 (one instance written, once)", fences)
		}
	})

	t.Run("scaled in while Distributed, missed the discard: the old password refused", func(t *testing.T) {
		g2, g3 := f.secretsOf("2"), f.secretsOf("3")
		if _, err := f.at(all, 2).Apply(ctx, g2, g3, 3); err != nil {
			t.Fatal(err)
		}
		if err := f.at(kept, 2).Retire(ctx, g2, g3); err != nil {
			t.Fatal(err)
		}
		f.logins(t, r2, map[string]bool{"2": true, "3": true})
		if err := f.at(all, 3).RepairIdle(ctx, g3); err != nil {
			t.Fatal(err)
		}
		for _, i := range all {
			f.logins(t, i, map[string]bool{"2": false, "3": true})
		}
	})

	t.Run("scaled in while Idle, returned during the next rotation: the Distributed repair sets it back first", func(t *testing.T) {
		g3, g4, g5 := f.secretsOf("3"), f.secretsOf("4"), f.secretsOf("5")
		b := f.at(kept, 3)
		if _, err := b.Apply(ctx, g3, g4, 4); err != nil {
			t.Fatal(err)
		}
		if err := b.Retire(ctx, g3, g4); err != nil {
			t.Fatal(err)
		}
		if _, err := f.at(kept, 4).Apply(ctx, g4, g5, 5); err != nil {
			t.Fatal(err)
		}
		if err := f.at(all, 4).RepairPending(ctx, g4, g5); err != nil {
			t.Fatal(err)
		}
		f.logins(t, r2, map[string]bool{"3": false, "4": true, "5": true})
		if err := f.at(all, 4).Retire(ctx, g4, g5); err != nil {
			t.Fatal(err)
		}
		for _, i := range all {
			f.logins(t, i, map[string]bool{"4": false, "5": true})
		}
	})

	t.Run("a second password set by hand is reported and left as it is", func(t *testing.T) {
		g5 := f.secretsOf("5")
		byHand := "typed-by-hand-0123456789abcdef"
		if err := c.Replicas[0].Exec("SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
			"ALTER USER '"+f.app+"'@'%' IDENTIFIED BY '"+byHand+"' RETAIN CURRENT PASSWORD",
			"SET GLOBAL super_read_only=ON"); err != nil {
			t.Fatal(err)
		}
		err := f.at(all, 5).RepairIdle(ctx, g5)
		rf, ok := engine.AsRefusal(err)
		if !ok || rf.Reason != string(reason.DualPasswordExists) || !strings.Contains(rf.Message, f.app+"@% on "+c.Replicas[0].Name) ||
			!strings.Contains(rf.Message, "kubectl rekey recover") || strings.Contains(rf.Message, byHand) {
			t.Fatalf("RepairIdle = %v, want DualPasswordExists naming %s on %s and recover, without the password", err, f.app, c.Replicas[0].Name)
		}
		if err := c.Replicas[0].CanLogin(f.app, byHand); err != nil {
			t.Fatalf("the hand change was overwritten: %v", err)
		}
		if err := c.Replicas[0].CanLogin(f.app, g5[DefaultKey(f.app)]); err != nil {
			t.Fatalf("the current password was taken away: %v", err)
		}
		if err := f.at(all, 5).Reset(ctx, g5); err != nil { // what recover does
			t.Fatal(err)
		}
	})

	t.Run("rebuilt from an empty data directory: its users created with the current passwords", func(t *testing.T) {
		if err := r2.Reinit(c.Primary, testenv.ReinitOptions{}); err != nil {
			t.Fatal(err)
		}
		g5 := f.secretsOf("5")
		if err := f.at(all, 5).RepairIdle(ctx, g5); err != nil {
			t.Fatal(err)
		}
		f.logins(t, r2, map[string]bool{"5": true})
		if m := markOf(t, r2, f.ops); m != `{"gen": 5, "dual": false}` {
			t.Fatalf("mark of a user the upkeep created: %q", m)
		}
	})
	assertNoBinlogDDL(t, c)
}
