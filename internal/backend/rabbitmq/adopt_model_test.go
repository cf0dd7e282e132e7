package rabbitmq

import (
	"context"
	"slices"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestAdoptModelOnRealBroker: what the explorer's RabbitMQ model
// (internal/explorer rabbitadopt.go) encodes of an adopted user
// (spec.rabbitmq.adopt) beyond testAdoptLifecycle, on a real
// rabbitmq-server: Release and Deprovision while a rotation is under way,
// the resets of an adopted current user (one that logs in, one that is
// gone, one without the set's mark), and the precheck beside a
// generation the status does not account for.
func TestAdoptModelOnRealBroker(t *testing.T) {
	br := startBroker(t)
	ctx := context.Background()

	// adopted provisions a set of base adopting user (password pw), and
	// applies generation 2 beside it: a rotation under way.
	adopted := func(t *testing.T, base, user, pw string) (*Backend, engine.Secrets, engine.Secrets, state) {
		t.Helper()
		b := br.backend(t, br.adoptSpec(t, base, user, pw))
		cur := engine.Secrets{KeyUsername: user, KeyPassword: pw}
		if err := b.ProveAdoption(ctx, pw); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Provision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		marked := br.state(t, user)
		if !slices.Contains(marked.tags, OwnerTag(testOwner)) {
			t.Fatalf("the adopted user %s carries %v: want the set's mark", user, marked.tags)
		}
		pending := gen(t, b, 2)
		if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
			t.Fatal(err)
		}
		br.login(t, b, pending[KeyUsername], pending[KeyPassword], true)
		return b, cur, pending, marked
	}
	unmarked := func(s state) state {
		s.tags = slices.DeleteFunc(slices.Clone(s.tags), func(t string) bool { return t == OwnerTag(testOwner) })
		return s
	}

	t.Run("release takes only the mark off the adopted current user and deletes the generation", func(t *testing.T) {
		t.Parallel()
		b, cur, pending, marked := adopted(t, "arel", "arel-legacy", "arel-password-0123456789")
		hash := br.passwordHash(t, "arel-legacy")
		if err := b.Release(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if br.exists(t, pending[KeyUsername]) {
			t.Error("Release left the generation a rotation made")
		}
		br.unchanged(t, b, "arel-legacy", cur[KeyPassword], unmarked(marked))
		if br.passwordHash(t, "arel-legacy") != hash {
			t.Error("Release changed the adopted user's password hash")
		}
	})

	t.Run("deprovision deletes the generation and hands the adopted current user back", func(t *testing.T) {
		t.Parallel()
		b, cur, pending, marked := adopted(t, "adep", "adep-legacy", "adep-password-0123456789")
		if err := b.Deprovision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if br.exists(t, pending[KeyUsername]) {
			t.Error("Deprovision left the generation a rotation made")
		}
		br.unchanged(t, b, "adep-legacy", cur[KeyPassword], unmarked(marked))
	})

	t.Run("precheck refuses a generation beside the adopted current user", func(t *testing.T) {
		t.Parallel()
		b, cur, _, _ := adopted(t, "apre", "apre-legacy", "apre-password-0123456789")
		refused(t, b.Precheck(ctx, cur), string(reason.DualPasswordExists), "apre-g2", cur[KeyPassword])
	})

	t.Run("reset of an adopted user that logs in writes nothing and deletes the generation", func(t *testing.T) {
		t.Parallel()
		b, cur, pending, marked := adopted(t, "aok", "aok-legacy", "aok-password-0123456789")
		hash := br.passwordHash(t, "aok-legacy")
		if err := b.Reset(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if br.passwordHash(t, "aok-legacy") != hash {
			t.Error("the reset rewrote an adopted user that logged in")
		}
		br.unchanged(t, b, "aok-legacy", cur[KeyPassword], marked)
		if br.exists(t, pending[KeyUsername]) {
			t.Error("the reset left the other generation")
		}
	})

	t.Run("reset creates a deleted adopted user anew, marked", func(t *testing.T) {
		t.Parallel()
		spec := br.adoptSpec(t, "agone", "agone-legacy", "agone-password-0123456789")
		b := br.backend(t, spec)
		cur := engine.Secrets{KeyUsername: "agone-legacy", KeyPassword: "agone-password-0123456789"}
		if _, err := b.Provision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		pending := gen(t, b, 2)
		if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
			t.Fatal(err)
		}
		if err := b.Retire(ctx, cur, pending); err != nil {
			t.Fatal(err)
		}
		if br.exists(t, "agone-legacy") {
			t.Fatal("the discard left the adopted user")
		}
		// The status and source Secret restored from before the rotation.
		if err := b.Reset(ctx, cur); err != nil {
			t.Fatal(err)
		}
		br.exact(t, "agone-legacy", spec) // made as a generation is: the spec's tags, the mark, the grants
		br.login(t, b, "agone-legacy", cur[KeyPassword], true)
		if br.exists(t, pending[KeyUsername]) {
			t.Error("the reset left the other generation")
		}
	})

	t.Run("reset refuses an adopted user without the mark", func(t *testing.T) {
		t.Parallel()
		const pw = "anot-password-0123456789"
		b := br.backend(t, br.adoptSpec(t, "anot", "anot-legacy", pw))
		before := br.state(t, "anot-legacy")
		cur := engine.Secrets{KeyUsername: "anot-legacy", KeyPassword: pw}
		br.repassword(t, "anot-legacy", "anot-by-hand-0123")
		refused(t, b.Reset(ctx, cur), string(reason.NotOwned), "anot-legacy", pw, "anot-by-hand-0123")
		br.unchanged(t, b, "anot-legacy", "anot-by-hand-0123", before)
	})
}
