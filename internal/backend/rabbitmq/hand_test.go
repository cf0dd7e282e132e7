package rabbitmq

import (
	"context"
	"slices"
	"testing"

	"rekey.io/rekey/internal/reason"
)

// TestHandChangeOnRealBroker: a person changes a generation's password by
// hand on a real rabbitmq-server (rabbitmqctl change_password: the
// password replaced, the tags, so rekey's mark, kept), and what each
// backend operation then does. The explorer's RabbitMQ model encodes each
// of these (internal/explorer rabbithand.go); the Precheck refusal is
// testRefusals' "precheck", a Retire refused for a hand-changed pending
// user its "retire keeps the current user when the pending one does not
// log in".
func TestHandChangeOnRealBroker(t *testing.T) {
	br := startBroker(t)
	ctx := context.Background()

	t.Run("the mark stays and only the new password logs in; set back, the precheck passes", func(t *testing.T) {
		t.Parallel()
		b := br.backend(t, br.spec("hmark"))
		cur := gen(t, b, 1)
		if _, err := b.Provision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		br.repassword(t, "hmark-g1", "by-hand")
		names, err := b.generations(ctx)
		if err != nil || !slices.Equal(names, []string{"hmark-g1"}) {
			t.Fatalf("generations after the hand change: %v, %v; want [hmark-g1]", names, err)
		}
		br.login(t, b, "hmark-g1", cur[KeyPassword], false)
		br.login(t, b, "hmark-g1", "by-hand", true)
		refused(t, b.Verify(ctx, cur), string(reason.PendingRejected), "run kubectl rekey recover", cur[KeyPassword], "by-hand")
		br.repassword(t, "hmark-g1", cur[KeyPassword]) // set back to the source Secret's
		if err := b.Precheck(ctx, cur); err != nil {
			t.Errorf("precheck after the password was set back: %v", err)
		}
		if err := b.Verify(ctx, cur); err != nil {
			t.Errorf("verify after the password was set back: %v", err)
		}
	})

	t.Run("apply again puts the pending user's password back", func(t *testing.T) {
		t.Parallel()
		b := br.backend(t, br.spec("happly"))
		cur, pending := gen(t, b, 1), gen(t, b, 2)
		if _, err := b.Provision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
			t.Fatal(err)
		}
		br.repassword(t, "happly-g2", "by-hand")
		refused(t, b.Verify(ctx, pending), string(reason.PendingRejected), "run kubectl rekey recover", pending[KeyPassword], "by-hand")
		if _, err := b.Apply(ctx, cur, pending, 2); err != nil { // a crash before the status recorded it
			t.Fatal(err)
		}
		br.login(t, b, "happly-g2", pending[KeyPassword], true)
		br.login(t, b, "happly-g2", "by-hand", false)
	})

	t.Run("retire deletes a hand-changed current user once the pending one logs in", func(t *testing.T) {
		t.Parallel()
		b := br.backend(t, br.spec("hretire"))
		cur, pending := gen(t, b, 1), gen(t, b, 2)
		if _, err := b.Provision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
			t.Fatal(err)
		}
		br.repassword(t, "hretire-g1", "by-hand")
		if err := b.Retire(ctx, cur, pending); err != nil {
			t.Fatal(err)
		}
		if br.exists(t, "hretire-g1") {
			t.Error("the hand-changed current user outlived the discard")
		}
		br.login(t, b, "hretire-g2", pending[KeyPassword], true)
	})

	t.Run("reset sets a hand-changed current user back and deletes the other generation", func(t *testing.T) {
		t.Parallel()
		b := br.backend(t, br.spec("hreset"))
		cur, pending := gen(t, b, 1), gen(t, b, 2)
		if _, err := b.Provision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
			t.Fatal(err)
		}
		br.repassword(t, "hreset-g1", "by-hand")
		if err := b.Reset(ctx, cur); err != nil {
			t.Fatal(err)
		}
		br.login(t, b, "hreset-g1", cur[KeyPassword], true)
		br.login(t, b, "hreset-g1", "by-hand", false)
		if br.exists(t, "hreset-g2") {
			t.Error("reset left the pending generation")
		}
		if err := b.Precheck(ctx, cur); err != nil {
			t.Errorf("precheck after the reset: %v", err)
		}
	})

	t.Run("release keeps the hand-changed password and takes the mark off", func(t *testing.T) {
		t.Parallel()
		b := br.backend(t, br.spec("hrel"))
		cur := gen(t, b, 1)
		if _, err := b.Provision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		br.repassword(t, "hrel-g1", "by-hand")
		if err := b.Release(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(br.state(t, "hrel-g1").tags, OwnerTag(testOwner)) {
			t.Error("release left the mark")
		}
		br.login(t, b, "hrel-g1", "by-hand", true)
	})

	t.Run("deprovision deletes a hand-changed generation", func(t *testing.T) {
		t.Parallel()
		b := br.backend(t, br.spec("hdel"))
		cur := gen(t, b, 1)
		if _, err := b.Provision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		br.repassword(t, "hdel-g1", "by-hand")
		if err := b.Deprovision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if br.exists(t, "hdel-g1") {
			t.Error("deprovision left the hand-changed generation")
		}
	})
}
