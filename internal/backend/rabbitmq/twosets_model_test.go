package rabbitmq

import (
	"context"
	"testing"

	"rekey.io/rekey/internal/engine"
)

// TestTwoBasesOnRealBroker: two sets on one real rabbitmq-server, each
// with its own user.base and its own mark, as the explorer's two-set
// RabbitMQ world (internal/explorer rabbittwosets.go) puts them: each
// set's every operation (provision, precheck, a rotation's apply and
// discard, a reset, Release, Deprovision) interleaved with the other's
// leaves the other's users exactly as they were and logging in, and no
// precheck sees the other's generations. (Specs that share a base, or
// where one adopts the other's generation, are refused before either
// changes anything: rabbitkube's TestClash.)
func TestTwoBasesOnRealBroker(t *testing.T) {
	br := startBroker(t)
	ctx := context.Background()
	a, b := br.backend(t, br.spec("two")), br.backendOf(t, br.spec("two-shop"), otherOwner)
	a1, a2, a3 := gen(t, a, 1), gen(t, a, 2), gen(t, a, 3)
	b1, b2 := gen(t, b, 1), gen(t, b, 2)

	// keeps asserts the users of the other set are as they were.
	keeps := func(t *testing.T, x *Backend, users map[string]engine.Secrets) {
		t.Helper()
		for _, s := range users {
			br.login(t, x, s[KeyUsername], s[KeyPassword], true)
		}
		got, err := x.generations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range got {
			if _, ok := users[n]; !ok {
				t.Errorf("the other set's generation %s left behind, or one of this set's counted as the other's: %v", n, got)
			}
		}
		if len(got) != len(users) {
			t.Errorf("%s generations %v, want %d", x.base, got, len(users))
		}
	}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := a.Provision(ctx, a1)
	step("provision a", err)
	_, err = b.Provision(ctx, b1)
	step("provision b", err)
	keeps(t, a, map[string]engine.Secrets{"two-g1": a1})

	// b rotates: its precheck sees none of a's users, its apply sweeps
	// none of them.
	step("precheck b", b.Precheck(ctx, b1))
	_, err = b.Apply(ctx, b1, b2, 2)
	step("apply b", err)
	keeps(t, a, map[string]engine.Secrets{"two-g1": a1})
	// a rotates while b's rotation is under way.
	step("precheck a", a.Precheck(ctx, a1))
	_, err = a.Apply(ctx, a1, a2, 2)
	step("apply a", err)
	keeps(t, b, map[string]engine.Secrets{"two-shop-g1": b1, "two-shop-g2": b2})
	// b's discard; a's reset (a rollback), its next rotation and discard.
	step("retire b", b.Retire(ctx, b1, b2))
	keeps(t, a, map[string]engine.Secrets{"two-g1": a1, "two-g2": a2})
	step("reset a", a.Reset(ctx, a1))
	keeps(t, b, map[string]engine.Secrets{"two-shop-g2": b2})
	step("precheck a again", a.Precheck(ctx, a1))
	_, err = a.Apply(ctx, a1, a3, 3)
	step("apply a again", err)
	step("retire a", a.Retire(ctx, a1, a3))
	keeps(t, b, map[string]engine.Secrets{"two-shop-g2": b2})
	step("precheck b again", b.Precheck(ctx, b2))
	// b is deleted (Delete), then a (Discard).
	step("deprovision b", b.Deprovision(ctx, b2))
	keeps(t, a, map[string]engine.Secrets{"two-g3": a3})
	keeps(t, b, map[string]engine.Secrets{})
	if br.exists(t, "two-shop-g2") {
		t.Error("Deprovision left b's generation")
	}
	_, err = b.Provision(ctx, b1) // b again, from scratch
	step("provision b again", err)
	step("release a", a.Release(ctx, a3))
	keeps(t, b, map[string]engine.Secrets{"two-shop-g1": b1})
	br.login(t, a, "two-g3", a3[KeyPassword], true)
}
