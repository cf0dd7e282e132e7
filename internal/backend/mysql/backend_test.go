package mysql

import (
	"context"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// Adopted passwords may hold any byte a user put in a Secret: the
// escaping must survive the real server's parser, on every instance.
func TestHostilePasswordsRoundTripOnRealMySQL(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	var insts []Instance
	for _, i := range c.Instances() {
		insts = append(insts, Instance{Name: i.Name, Addr: i.Addr()})
	}
	spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: testenv.EnvUser}, Users: []v1.MySQLUser{{Name: "hostile"}}}
	b, err := New(spec, insts, testenv.EnvPassword, caPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cur := engine.Secrets{"HOSTILE_PASSWORD": `it's a "test" \ with %_ and ; DROP USER root; --` + "\n\x1a"}
	pending := engine.Secrets{"HOSTILE_PASSWORD": `\'' OR 1=1 -- ` + "\x00tail"}
	if _, err := b.Provision(ctx, cur); err != nil {
		t.Fatal(err)
	}
	login := func(pw string, want bool) {
		t.Helper()
		for _, i := range c.Instances() {
			if err := i.CanLogin("hostile", pw); (err == nil) != want {
				t.Fatalf("%s: login ok=%v, want %v (%v)", i.Name, err == nil, want, err)
			}
		}
	}
	login(cur["HOSTILE_PASSWORD"], true)
	if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
		t.Fatal(err)
	}
	login(cur["HOSTILE_PASSWORD"], true)
	login(pending["HOSTILE_PASSWORD"], true)
	if err := b.Retire(ctx, cur, pending); err != nil {
		t.Fatal(err)
	}
	login(cur["HOSTILE_PASSWORD"], false)
	login(pending["HOSTILE_PASSWORD"], true)
	for _, r := range c.Replicas {
		if v, _ := r.QueryString("SELECT @@GLOBAL.super_read_only"); v != "1" {
			t.Fatalf("%s left with super_read_only=%s", r.Name, v)
		}
	}
	t.Run("ReplicationPassword", func(t *testing.T) { checkReplicationPassword(t, c) })
}
