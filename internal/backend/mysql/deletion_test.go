package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

func TestCreatedAndDeletionSteps(t *testing.T) {
	u := func(name string) User { return User{Name: name, Host: "%", Key: DefaultKey(name)} }
	users := []User{u("a"), u("b"), u("c"), u("d"), u("admin")}
	mine := account{exists: true, owner: "me"}
	theirs := account{exists: true, owner: "them"}
	plain := account{exists: true}
	rows := func(m map[string]account) map[string]account {
		out := map[string]account{}
		for n, a := range m {
			out[accountKey(n, "%")] = a
		}
		return out
	}
	seen := map[string]map[string]account{
		// a: created for me everywhere, gone already on i2 (a crash).
		// b: marked on i2 only (recreated there; adopted elsewhere).
		// c: another set's. d: gone everywhere. admin: marked, never dropped.
		"i1": rows(map[string]account{"a": mine, "b": plain, "c": theirs, "admin": mine}),
		"i2": rows(map[string]account{"b": mine, "c": theirs, "admin": mine}),
	}
	got := created("me", "admin", users, seen)
	if want := map[string]bool{"A_PASSWORD": true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("created = %v, want %v", got, want)
	}
	names := func(us []User) []string {
		var out []string
		for _, u := range us {
			out = append(out, u.Name)
		}
		return out
	}
	for _, c := range []struct {
		inst          string
		drop          map[string]bool
		dropped, rels []string
	}{
		{"i1", got, []string{"a"}, []string{"admin"}},
		{"i2", got, nil, []string{"b", "admin"}},
		{"i1", nil, nil, []string{"a", "admin"}}, // Release
	} {
		d, r := deletionSteps("me", users, seen[c.inst], c.drop)
		if !slices.Equal(names(d), c.dropped) || !slices.Equal(names(r), c.rels) {
			t.Errorf("%s drop=%v: dropped %v released %v, want %v and %v", c.inst, c.drop, names(d), names(r), c.dropped, c.rels)
		}
	}
}

// deletionFixture: users of every kind deletion tells apart, on a cluster
// whose instances were seeded without the binary log (as rekey writes):
//
//	made<n>:    missing, so the backend creates it (marked for the set);
//	adopted<n>: existed before rekey;
//	handed<n>:  missing, its password handed over (adoptSecretRef): created unmarked;
//	other<n>:   existed, marked for another set;
//	copy<n>:    existed except on the last replica (re-initialised), where
//	            the backend recreates it, marked there only.
type deletionFixture struct {
	c     *testenv.MySQLCluster
	b     *Backend
	cur   engine.Secrets
	n     string
	users []string
}

const deletionOwner, otherOwner = "0b4c6a52-7a0e-4bde-9f9e-4f1f4b8f3e21", "9a8e1c3d-0000-4000-8000-000000000002"

func newDeletionFixture(t *testing.T, c *testenv.MySQLCluster, n string) *deletionFixture {
	t.Helper()
	f := &deletionFixture{c: c, n: n, cur: engine.Secrets{}}
	var specUsers []v1.MySQLUser
	for _, kind := range []string{"made", "adopted", "handed", "other", "copy"} {
		name := kind + n
		f.users = append(f.users, name)
		f.cur[DefaultKey(name)] = name + "-current-password-0123456789ab"
		specUsers = append(specUsers, v1.MySQLUser{Name: name, Grants: []v1.MySQLGrant{{Privileges: []string{"SELECT"}, Object: "app.*"}}})
	}
	last := c.Replicas[len(c.Replicas)-1]
	for _, i := range c.Instances() {
		stmts := []string{
			"CREATE USER 'adopted" + n + "'@'%' IDENTIFIED BY " + quote(f.cur[DefaultKey("adopted"+n)]),
			"CREATE USER 'other" + n + "'@'%' IDENTIFIED BY " + quote(f.cur[DefaultKey("other"+n)]) + " ATTRIBUTE " + attribute(map[string]any{ownerKey: otherOwner}),
		}
		if i != last {
			stmts = append(stmts, "CREATE USER 'copy"+n+"'@'%' IDENTIFIED BY "+quote(f.cur[DefaultKey("copy"+n)]))
		}
		unlogged(t, i, stmts...)
	}
	spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: testenv.EnvUser}, Users: specUsers}
	var err error
	if f.b, err = New(spec, clusterInstances(c), testenv.EnvPassword, caPEM(t)); err != nil {
		t.Fatal(err)
	}
	if err := f.b.SetOwner(deletionOwner, []string{DefaultKey("handed" + n)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Provision(context.Background(), f.cur); err != nil {
		t.Fatal(err)
	}
	return f
}

// unlogged runs stmts on inst as a person at the server would, keeping
// them out of the binary log so that every instance is seeded alike.
func unlogged(t *testing.T, inst *testenv.MySQLInstance, stmts ...string) {
	t.Helper()
	all := append([]string{"SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF"}, stmts...)
	if inst.Role != testenv.RolePrimary {
		all = append(all, "SET GLOBAL super_read_only=ON")
	}
	if err := inst.Exec(all...); err != nil {
		t.Fatal(err)
	}
}

// mark is the owner mark INFORMATION_SCHEMA.USER_ATTRIBUTES shows for
// user on inst ("" when none), and whether the user exists there.
func mark(t *testing.T, inst *testenv.MySQLInstance, user string) (string, bool) {
	t.Helper()
	m, err := inst.QueryString(`SELECT COALESCE(JSON_UNQUOTE(JSON_EXTRACT(ATTRIBUTE, '$."rekey.io/set"')), '') FROM INFORMATION_SCHEMA.USER_ATTRIBUTES WHERE USER=? AND HOST='%'`, user)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return m, true
}

// expect asserts, on every instance, whether each user logs in with cur
// and which owner mark it carries (want: user → mark; "-": the user is
// gone; "last:<mark>": that mark on the last replica, none elsewhere).
func (f *deletionFixture) expect(t *testing.T, want map[string]string) {
	t.Helper()
	last := f.c.Replicas[len(f.c.Replicas)-1]
	for _, i := range f.c.Instances() {
		for _, u := range f.users {
			w := want[u]
			if m, ok := strings.CutPrefix(w, "last:"); ok {
				w = ""
				if i == last {
					w = m
				}
			}
			got, exists := mark(t, i, u)
			err := i.CanLogin(u, f.cur[DefaultKey(u)])
			if w == "-" {
				if exists || err == nil {
					t.Errorf("%s on %s: exists=%v, login err=%v; want dropped and refused", u, i.Name, exists, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s on %s refuses its current password: %v", u, i.Name, err)
			}
			if got != w {
				t.Errorf("%s on %s carries mark %q, want %q", u, i.Name, got, w)
			}
		}
		if i.Role != testenv.RolePrimary {
			if v, _ := i.QueryString("SELECT @@GLOBAL.super_read_only"); v != "1" {
				t.Errorf("%s left with super_read_only=%q", i.Name, v)
			}
		}
	}
}

// TestDeletionOnRealMySQL: provisioning marks only the users it creates
// and whose passwords are rekey's; Release removes this set's marks and
// nothing else, every user still logging in; Deprovision drops only users
// marked for this set on every instance that has them, and leaves the
// adopted, the handed-over, another set's and a user rekey merely
// recreated on one instance. Neither discards a secondary password
// someone else set. Both run twice (a re-run after a crash), and nothing
// reaches a binary log.
func TestDeletionOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	last := c.Replicas[len(c.Replicas)-1]
	provisioned := func(n string) map[string]string {
		return map[string]string{"made" + n: deletionOwner, "adopted" + n: "", "handed" + n: "",
			"other" + n: otherOwner, "copy" + n: "last:" + deletionOwner}
	}
	// run sets a secondary password on copy<n> where rekey marked it (as
	// someone at the server would: cur becomes the secondary), runs del
	// twice, and asserts that both passwords still log in there.
	run := func(t *testing.T, f *deletionFixture, del func(context.Context, engine.Secrets) error) {
		t.Helper()
		f.expect(t, provisioned(f.n))
		copyUser, theirs := "copy"+f.n, "someone-elses-password-0123"
		unlogged(t, last, "ALTER USER '"+copyUser+"'@'%' IDENTIFIED BY "+quote(theirs)+" RETAIN CURRENT PASSWORD")
		for range 2 {
			if err := del(ctx, f.cur); err != nil {
				t.Fatal(err)
			}
		}
		if err := last.CanLogin(copyUser, theirs); err != nil {
			t.Errorf("%s on %s refuses the password someone else set: %v", copyUser, last.Name, err)
		}
	}

	t.Run("Release", func(t *testing.T) {
		f := newDeletionFixture(t, c, "r")
		// An instance that does not answer holds it, before anything changed.
		gone := *f.b
		gone.Instances = append(slices.Clone(f.b.Instances), Instance{Name: "gone", Addr: "127.0.0.1:1"})
		if u, ok := engine.AsUnreachable(gone.Release(ctx, f.cur)); !ok || u.Instance != "gone" {
			t.Fatalf("Release with an instance down: %v, want it unreachable", u)
		}
		run(t, f, f.b.Release)
		f.expect(t, map[string]string{"otherr": otherOwner})
	})

	t.Run("Deprovision", func(t *testing.T) {
		f := newDeletionFixture(t, c, "d")
		unowned := *f.b
		unowned.owner = ""
		if err := unowned.Deprovision(ctx, f.cur); err == nil {
			t.Fatal("Deprovision without an owner did not refuse")
		}
		run(t, f, f.b.Deprovision)
		f.expect(t, map[string]string{"maded": "-", "otherd": otherOwner})
	})

	// A manager that lost the leadership (its fence refuses) changes no
	// account: every user keeps its mark and logs in.
	t.Run("Fenced", func(t *testing.T) {
		f := newDeletionFixture(t, c, "f")
		lost := errors.New("not the leader")
		fenced := *f.b
		fenced.Fence = func(context.Context) error { return lost }
		for name, del := range map[string]func(context.Context, engine.Secrets) error{"Deprovision": fenced.Deprovision, "Release": fenced.Release} {
			if err := del(ctx, f.cur); !errors.Is(err, lost) {
				t.Fatalf("%s by a fenced manager: %v, want the fence's refusal", name, err)
			}
		}
		if _, err := fenced.Apply(ctx, f.cur, f.cur, 2); !errors.Is(err, lost) {
			t.Fatalf("Apply by a fenced manager: %v, want the fence's refusal", err)
		}
		f.expect(t, provisioned(f.n)) // marks as provisioned, and every login with cur
	})

	// An admin without ALLOW_NONEXISTENT_DEFINER cannot drop the DEFINER
	// of a stored routine: refused, naming the user and what to do; the
	// user keeps logging in, and the deletion finishes once the routine
	// is gone.
	t.Run("DefinerRefused", func(t *testing.T) {
		f := newDeletionFixture(t, c, "x")
		const admin, adminPW = "deladmx", "deladmx-password-0123456789"
		for _, i := range c.Instances() {
			unlogged(t, i, "CREATE USER '"+admin+"'@'%' IDENTIFIED BY '"+adminPW+"'",
				"GRANT ALL ON *.* TO '"+admin+"'@'%' WITH GRANT OPTION",
				"REVOKE ALLOW_NONEXISTENT_DEFINER, SET_ANY_DEFINER ON *.* FROM '"+admin+"'@'%'",
				"CREATE DATABASE IF NOT EXISTS delx",
				"CREATE DEFINER='madex'@'%' PROCEDURE delx.p() SELECT 1")
		}
		b := *f.b
		b.AdminUser, b.AdminPassword = admin, adminPW
		err := b.Deprovision(ctx, f.cur)
		if rf, ok := engine.AsRefusal(err); !ok || !strings.Contains(rf.Message, "user madex@% on ") || !strings.Contains(rf.Message, "DEFINER") {
			t.Fatalf("Deprovision with madex a DEFINER: %v, want a refusal naming madex", err)
		}
		f.expect(t, map[string]string{"madex": deletionOwner, "otherx": otherOwner})
		for _, i := range c.Instances() {
			unlogged(t, i, "DROP PROCEDURE delx.p")
		}
		if err := b.Deprovision(ctx, f.cur); err != nil {
			t.Fatal(err)
		}
		f.expect(t, map[string]string{"madex": "-", "otherx": otherOwner})
	})
	assertNoBinlogDDL(t, c)
}
