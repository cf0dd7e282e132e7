package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestRepairIdleOnRealPostgres: the upkeep at rest on a real primary and
// replica reports a login role of the set beside the current login and a
// current login that does not log in with the source Secret's password,
// changes no role either way, and is quiet once recover's reset or the
// person put the server back.
func TestRepairIdleOnRealPostgres(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	b := newTestBackend(t, p, testUID, "midle")
	g1, _ := b.NewSecrets(1)
	g2, _ := b.NewSecrets(2)
	if _, err := b.Provision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	if err := b.RepairIdle(ctx, g1); err != nil {
		t.Fatalf("upkeep of a set as it was provisioned: %v", err)
	}
	refusedNaming := func(err error, r reason.Reason, parts ...string) {
		t.Helper()
		if !isRefusal(err, r) {
			t.Fatalf("upkeep: %v, want %s", err, r)
		}
		for _, part := range parts {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("upkeep's %s does not name %q: %v", r, part, err)
			}
		}
		for _, s := range []engine.Secrets{g1, g2} {
			if strings.Contains(err.Error(), s[KeyPassword]) {
				t.Errorf("upkeep's refusal holds a password: %v", err)
			}
		}
	}

	// A rotation applied, then the status and source Secret restored from
	// before it: its role is left beside the current login.
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	refusedNaming(b.RepairIdle(ctx, g1), reason.DualPasswordExists, "midle_g2", "kubectl rekey recover")
	assertLogins(t, p, g1, "midle_g1")
	assertLogins(t, p, g2, "midle_g2")

	// Someone changes that role's password by hand: still reported, and
	// left as the person made it.
	if err := p.Exec(p.Primary, "ALTER ROLE midle_g2 PASSWORD 'changed-by-hand'"); err != nil {
		t.Fatal(err)
	}
	refusedNaming(b.RepairIdle(ctx, g1), reason.DualPasswordExists, "midle_g2")
	if err := p.CanLogin(p.Primary, "midle_g2", "changed-by-hand"); err != nil {
		t.Fatalf("the upkeep changed midle_g2: %v", err)
	}

	// Recover's reset drops it; the upkeep is quiet again.
	if err := b.Reset(ctx, g1); err != nil {
		t.Fatal(err)
	}
	if roleExists(t, p, "midle_g2") {
		t.Fatal("midle_g2 still exists after the reset")
	}
	quiet(t, b, g1, "after the reset")

	// The current login's password changed by hand: reported, naming both
	// ways back, and left as the person made it; set back, quiet.
	if err := p.Exec(p.Primary, "ALTER ROLE midle_g1 PASSWORD 'changed-by-hand-too'"); err != nil {
		t.Fatal(err)
	}
	refusedNaming(b.RepairIdle(ctx, g1), reason.KeyMismatch, "set it back to the source Secret's password", "kubectl rekey recover")
	if err := p.CanLogin(p.Primary, "midle_g1", "changed-by-hand-too"); err != nil {
		t.Fatalf("the upkeep changed midle_g1: %v", err)
	}
	if err := p.Exec(p.Primary, "ALTER ROLE midle_g1 PASSWORD '"+g1[KeyPassword]+"'"); err != nil {
		t.Fatal(err)
	}
	quiet(t, b, g1, "after the password was set back")
}

// quiet waits until the upkeep reports nothing: the replica replays what
// the primary was just told.
func quiet(t *testing.T, b *Backend, cur engine.Secrets, when string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = b.RepairIdle(context.Background(), cur); err == nil {
			return
		}
	}
	t.Fatalf("upkeep %s: %v", when, err)
}
