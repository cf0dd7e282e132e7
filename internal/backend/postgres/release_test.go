package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestRelease: deleting a set with deletionPolicy Discard. After two
// rotations and a login an interrupted rotation left, Release drops every
// login of the set but the current one (waiting for a live session), and
// leaves the current login working everywhere, acting as the group, with
// its password, but without the set's mark: a later set can then adopt it,
// which the mark refused before. Roles without the set's mark are
// untouched; a second Release changes nothing.
func TestRelease(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	b := newTestBackend(t, p, testUID, "rel")
	var g [5]engine.Secrets
	for i := 1; i <= 4; i++ {
		g[i], _ = b.NewSecrets(int64(i))
	}
	if _, err := b.Provision(ctx, g[1]); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if _, err := b.Apply(ctx, g[i], g[i+1], int64(i+1)); err != nil {
			t.Fatal(err)
		}
		if err := b.Retire(ctx, g[i], g[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Apply(ctx, g[3], g[4], 4); err != nil { // then forgotten
		t.Fatal(err)
	}
	const otherUID = "22222222-3333-4444-8555-666666666666"
	if err := p.Exec(p.Primary, "CREATE ROLE rel_g8 LOGIN PASSWORD 'Hand0123456789'",
		"CREATE ROLE rel_g5 LOGIN PASSWORD 'Other0123456789'", "COMMENT ON ROLE rel_g5 IS '"+ownerMark(otherUID)+"'"); err != nil {
		t.Fatal(err)
	}
	foreign := map[string]string{"rel_g8": "Hand0123456789", "rel_g5": "Other0123456789"}
	before := map[string][2]string{}
	for r := range foreign {
		before[r] = [2]string{rolpassword(t, p, r), roleComment(t, p, r)}
	}
	verifier3 := rolpassword(t, p, "rel_g3")

	// The mark keeps a later set from adopting the current login.
	later, err := New(&v1.PostgresSpec{Hosts: []string{p.Primary.Addr(), p.Replica.Addr()},
		Login: v1.PostgresLogin{Base: "relnext", Group: "app_owner"}, Adopt: &v1.PostgresAdopt{Role: "rel_g3"}},
		otherUID, p.AdminUser, p.AdminPassword, p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := later.ProveAdoption(ctx, "relnext", g[3][KeyPassword]); !isRefusal(err, reason.ProvisionFailed) {
		t.Fatalf("adopting a marked login: %v, want ProvisionFailed", err)
	}

	if err := b.Release(ctx, engine.Secrets{}); !isRefusal(err, reason.KeyMismatch) {
		t.Fatalf("Release without a current login: %v, want KeyMismatch", err)
	}
	// A session of the leftover login holds its drop back, named.
	s4, err := p.Connect(ctx, p.Replica, "rel_g4", g[4][KeyPassword], "postgres")
	if err != nil {
		t.Fatal(err)
	}
	err = b.Release(ctx, g[3])
	if !isRefusal(err, reason.UsersInUse) || !strings.Contains(err.Error(), "rel_g4") {
		t.Fatalf("Release with a session of rel_g4 open: %v, want UsersInUse naming it", err)
	}
	s4.Close(ctx)
	waitNoSessions(t, p, "rel_g4")
	for range 2 { // idempotent
		if err := b.Release(ctx, g[3]); err != nil {
			t.Fatal(err)
		}
	}

	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		if err := p.CanLogin(i, "rel_g3", g[3][KeyPassword]); err != nil {
			t.Fatalf("the current login rel_g3 on %s after Release: %v", i.Name, err)
		}
		for _, n := range []int{1, 2, 4} {
			if err := p.CanLogin(i, g[n][KeyUsername], g[n][KeyPassword]); err == nil {
				t.Errorf("%s still logs in on %s after Release", g[n][KeyUsername], i.Name)
			}
		}
	}
	if roleExists(t, p, "rel_g4") {
		t.Error("Release left rel_g4")
	}
	c3, err := p.Connect(ctx, p.Primary, "rel_g3", g[3][KeyPassword], "postgres")
	if err != nil {
		t.Fatal(err)
	}
	var cur string
	err = c3.QueryRow(ctx, "SELECT current_user").Scan(&cur)
	c3.Close(ctx)
	if err != nil || cur != "app_owner" {
		t.Errorf("a session of the released rel_g3 acts as %q (%v), want the group app_owner", cur, err)
	}
	if rolpassword(t, p, "rel_g3") != verifier3 {
		t.Error("Release changed the verifier of rel_g3")
	}
	if c := roleComment(t, p, "rel_g3"); c != "" {
		t.Errorf("rel_g3 still carries %q after Release", c)
	}
	for r, pw := range foreign {
		if got := [2]string{rolpassword(t, p, r), roleComment(t, p, r)}; got != before[r] {
			t.Errorf("Release changed %s", r)
		}
		if err := p.CanLogin(p.Primary, r, pw); err != nil {
			t.Errorf("%s after Release: %v", r, err)
		}
	}

	// Unmarked: the former set's Deprovision passes it by, and the later
	// set adopts it.
	if err := b.Deprovision(ctx, g[3]); err != nil {
		t.Fatal(err)
	}
	if !roleExists(t, p, "rel_g3") {
		t.Fatal("the released rel_g3 was dropped by its former set's Deprovision")
	}
	if err := later.ProveAdoption(ctx, "relnext", g[3][KeyPassword]); err != nil {
		t.Fatal(err)
	}
	if got, err := later.Provision(ctx, g[3]); err != nil || !got.Adopted {
		t.Fatalf("the later set's adoption of rel_g3: %+v, %v", got, err)
	}
	if err := b.Release(ctx, g[3]); err != nil { // the former set again
		t.Fatal(err)
	}
	if c := roleComment(t, p, "rel_g3"); c != ownerMark(otherUID) {
		t.Errorf("rel_g3 carries %q, want the later set's mark", c)
	}
}

// TestFencedManagerChangesNoRole: a backend whose fence refuses (its
// manager lost the leadership) changes no role: a rotation and a deletion
// fail with the fence's refusal, and the current login works as before.
func TestFencedManagerChangesNoRole(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	b := newTestBackend(t, p, testUID, "fen")
	g1, _ := b.NewSecrets(1)
	g2, _ := b.NewSecrets(2)
	if _, err := b.Provision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	lost := errors.New("not the leader")
	b.Fence = func(context.Context) error { return lost }
	if _, err := b.Apply(ctx, g1, g2, 2); !errors.Is(err, lost) {
		t.Fatalf("Apply by a fenced manager: %v, want the fence's refusal", err)
	}
	for name, del := range map[string]func(context.Context, engine.Secrets) error{"Release": b.Release, "Deprovision": b.Deprovision} {
		if err := del(ctx, g1); !errors.Is(err, lost) {
			t.Fatalf("%s by a fenced manager: %v, want the fence's refusal", name, err)
		}
	}
	b.Fence = nil
	if err := b.Verify(ctx, g1); err != nil {
		t.Fatalf("the current login no longer works after a fenced manager's calls: %v", err)
	}
	if err := b.Verify(ctx, g2); err == nil {
		t.Fatal("a fenced manager's Apply made generation 2 log in")
	}
}
