package rabbitmq

import (
	"context"
	"testing"

	"rekey.io/rekey/internal/reason"
)

// TestRepairIdleOnRealBroker: the upkeep at rest on a real rabbitmq-server
// reports a generation beside the current user and a current user that
// does not log in with the source Secret's password, changes nothing
// either way, and is quiet once recover's reset or the person put the
// broker back. The explorer's RabbitMQ model (rabbitmodel.go's RepairIdle)
// encodes each.
func TestRepairIdleOnRealBroker(t *testing.T) {
	br := startBroker(t)
	ctx := context.Background()
	spec := br.spec("idle")
	b := br.backend(t, spec)
	cur, restored := gen(t, b, 1), gen(t, b, 2)
	if _, err := b.Provision(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if err := b.RepairIdle(ctx, cur); err != nil {
		t.Fatalf("upkeep of a set as it was provisioned: %v", err)
	}

	// A rotation applied, then the status and source Secret restored from
	// before it: the broker holds its generation beside the current user.
	if _, err := b.Apply(ctx, cur, restored, 2); err != nil {
		t.Fatal(err)
	}
	refused(t, b.RepairIdle(ctx, cur), string(reason.DualPasswordExists), "kubectl rekey recover", cur[KeyPassword], restored[KeyPassword])
	br.login(t, b, "idle-g1", cur[KeyPassword], true)
	br.login(t, b, "idle-g2", restored[KeyPassword], true)
	br.exact(t, "idle-g2", spec)

	// Someone changes that generation's password by hand: still reported
	// (the consumers that restarted onto it are refused now), nothing
	// changed.
	br.repassword(t, "idle-g2", "by-hand")
	refused(t, b.RepairIdle(ctx, cur), string(reason.DualPasswordExists), "idle-g2", cur[KeyPassword], "by-hand")
	br.login(t, b, "idle-g2", "by-hand", true)

	// Recover's reset deletes it; the upkeep is quiet again.
	if err := b.Reset(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if br.exists(t, "idle-g2") {
		t.Fatal("idle-g2 still exists after the reset")
	}
	if err := b.RepairIdle(ctx, cur); err != nil {
		t.Fatalf("upkeep after the reset: %v", err)
	}

	// The current user's password changed by hand, then deleted by hand:
	// reported, naming the two ways back, and left as the person made it.
	br.repassword(t, "idle-g1", "by-hand-too")
	refused(t, b.RepairIdle(ctx, cur), string(reason.KeyMismatch), "set it back to the source Secret's password", cur[KeyPassword], "by-hand-too")
	refused(t, b.RepairIdle(ctx, cur), string(reason.KeyMismatch), "kubectl rekey recover")
	br.login(t, b, "idle-g1", "by-hand-too", true)
	br.repassword(t, "idle-g1", cur[KeyPassword])
	if err := b.RepairIdle(ctx, cur); err != nil {
		t.Fatalf("upkeep after the password was set back: %v", err)
	}
	br.do(t, "delete idle-g1", drain(br.admin.DeleteUser("idle-g1")))
	refused(t, b.RepairIdle(ctx, cur), string(reason.KeyMismatch), "changed or deleted outside rekey", cur[KeyPassword])
	if br.exists(t, "idle-g1") {
		t.Error("the upkeep made idle-g1 again; it only reports")
	}
}
