package postgres

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestModelTwoSets: what the explorer's two sets on one PostgreSQL
// cluster (internal/explorer, pgtwosets.go) encode, on a real primary and
// replica: two sets (two UIDs), each with its own base and group, each
// operation of one interleaved with the other's, and neither changes,
// drops or releases a role of the other's: Provision, Apply (and its
// sweep), Precheck and the upkeep at rest beside the other's roles,
// Retire, Reset, Release and Deprovision. And the premise of the model's
// bases of their own: a third set given the first's base makes its own
// role where the name is free and is refused (NotOwned) where the first
// has one, which it leaves as it is; each set's Retire, upkeep and
// Deprovision see only their own roles of that base.
func TestModelTwoSets(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	const uidB, uidC = "6c1d2e3f-4a5b-4c6d-8e7f-90a1b2c3d4e5", "7d2e3f4a-5b6c-4d7e-9f80-a1b2c3d4e5f6"
	t.Cleanup(func() {
		for _, r := range []string{"mtsa_g1", "mtsa_g2", "mtsa_g3", "mtsb_g1", "mtsb_g2", "mtsb_owner"} {
			_ = p.Exec(p.Primary, "DROP ROLE IF EXISTS "+r)
		}
	})
	if err := p.Exec(p.Primary, "CREATE ROLE mtsb_owner NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	a := newTestBackend(t, p, testUID, "mtsa")
	b, err := New(&v1.PostgresSpec{Hosts: []string{p.Primary.Addr(), p.Replica.Addr()},
		Login: v1.PostgresLogin{Base: "mtsb", Group: "mtsb_owner"}}, uidB, p.AdminUser, p.AdminPassword, p.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	var ga, gb [4]engine.Secrets
	for i := 1; i <= 3; i++ {
		ga[i], _ = a.NewSecrets(int64(i))
		gb[i], _ = b.NewSecrets(int64(i))
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	marked := func(role, uid string) {
		t.Helper()
		if c := roleComment(t, p, role); !strings.HasPrefix(c, ownerMark(uid)) {
			t.Fatalf("%s carries %q, want its set's mark %q", role, c, ownerMark(uid))
		}
	}
	gone := func(role string) {
		t.Helper()
		if roleExists(t, p, role) {
			t.Fatalf("%s is left", role)
		}
	}
	_, err = a.Provision(ctx, ga[1])
	must("A provisions", err)
	_, err = b.Provision(ctx, gb[1])
	must("B provisions", err)
	_, err = a.Apply(ctx, ga[1], ga[2], 2)
	must("A applies", err)
	must("B's precheck beside A's two roles", b.Precheck(ctx, gb[1]))
	must("B's upkeep beside A's two roles", b.RepairIdle(ctx, gb[1]))
	_, err = b.Apply(ctx, gb[1], gb[2], 2)
	must("B applies beside A's two roles", err)
	assertLogins(t, p, ga[1], "mtsa_g1")
	assertLogins(t, p, ga[2], "mtsa_g2")
	marked("mtsa_g1", testUID)
	marked("mtsb_g2", uidB)

	// A's discard while B is mid-rotation, a session open as B's current
	// role: A drops its own old role only.
	c, err := p.Connect(ctx, p.Replica, "mtsb_g1", gb[1][KeyPassword], "postgres")
	must("B's consumer logs in", err)
	defer c.Close(ctx)
	must("A retires", a.Retire(ctx, ga[1], ga[2]))
	gone("mtsa_g1")
	assertLogins(t, p, gb[1], "mtsb_g1")
	assertLogins(t, p, gb[2], "mtsb_g2")

	// B rolls back (Reset) while A rotates again: B drops its new role
	// only; A's Apply sweeps nothing of B's.
	_, err = a.Apply(ctx, ga[2], ga[3], 3)
	must("A applies again", err)
	must("B resets", b.Reset(ctx, gb[1]))
	gone("mtsb_g2")
	assertLogins(t, p, ga[2], "mtsa_g2")
	assertLogins(t, p, ga[3], "mtsa_g3")
	assertLogins(t, p, gb[1], "mtsb_g1")

	// A third set with A's base: its own role where the name is free,
	// refused where A has one, which stays A's.
	cs, err := New(&v1.PostgresSpec{Hosts: []string{p.Primary.Addr(), p.Replica.Addr()},
		Login: v1.PostgresLogin{Base: "mtsa", Group: "app_owner"}}, uidC, p.AdminUser, p.AdminPassword, p.CAPEM)
	must("C", err)
	gc1, _ := cs.NewSecrets(1)
	gc2, _ := cs.NewSecrets(2)
	_, err = cs.Provision(ctx, gc1)
	must("C provisions mtsa_g1, free again", err)
	marked("mtsa_g1", uidC)
	must("C's precheck beside A's roles of its base", cs.Precheck(ctx, gc1))
	if _, err := cs.Apply(ctx, gc1, gc2, 2); !isRefusal(err, reason.NotOwned) || !strings.Contains(err.Error(), "mtsa_g2") {
		t.Fatalf("C's Apply onto A's mtsa_g2: %v, want NotOwned naming it", err)
	}
	assertLogins(t, p, ga[2], "mtsa_g2")
	marked("mtsa_g2", testUID)
	must("A retires mtsa_g2 beside C's mtsa_g1", a.Retire(ctx, ga[2], ga[3]))
	gone("mtsa_g2")
	assertLogins(t, p, gc1, "mtsa_g1")
	marked("mtsa_g1", uidC)
	must("A's upkeep beside C's role of its base", a.RepairIdle(ctx, ga[3]))
	must("C deprovisions", cs.Deprovision(ctx, gc1))
	gone("mtsa_g1")
	assertLogins(t, p, ga[3], "mtsa_g3")

	// B is released (deletionPolicy Discard) and A deleted (Delete): each
	// changes its own roles only.
	must("B releases", b.Release(ctx, gb[1]))
	if c := roleComment(t, p, "mtsb_g1"); strings.HasPrefix(c, ownerMark(uidB)) {
		t.Fatalf("Release left B's mark on mtsb_g1: %q", c)
	}
	assertLogins(t, p, ga[3], "mtsa_g3")
	marked("mtsa_g3", testUID)
	must("A deprovisions", a.Deprovision(ctx, ga[3]))
	gone("mtsa_g3")
	assertLogins(t, p, gb[1], "mtsb_g1")
	if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("B's consumer session: %v", err)
	}
	c.Close(ctx)
	waitNoSessions(t, p, "mtsb_g1")
	must("drop B's released role", p.Exec(p.Primary, "DROP ROLE mtsb_g1", "DROP ROLE mtsb_owner"))
}
