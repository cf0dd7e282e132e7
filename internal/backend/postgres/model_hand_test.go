package postgres

import (
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestModelHandChange: what the explorer's PostgreSQL model with a
// person's change of a role's password (internal/explorer, pghand.go)
// encodes, on a real primary and replica. ALTER ROLE ... PASSWORD on the
// primary keeps the role's comment, so rekey's mark, and the replica
// replays it; a session opened before it goes on. The hand-changed
// current login: the rotation does not start (KeyMismatch, naming
// recover), a reset sets the source Secret's password again. The
// hand-changed pending login: Verify refuses it (PendingRejected, naming
// recover), Retire refuses it and keeps the current login (naming the
// pending password to set back), an Apply again sets rekey's password
// back, and, set back by hand, Retire drops the current login. A
// hand-changed current login is dropped by the discard once no session
// uses it (an open one holds the drop back), Release keeps the person's
// password and takes the mark off, and Deprovision drops it.
func TestModelHandChange(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	b := newTestBackend(t, p, testUID, "mhand")
	var g [4]engine.Secrets
	for i := 1; i <= 3; i++ {
		g[i], _ = b.NewSecrets(int64(i))
	}
	const byHand = "set-by-hand-0123456789"
	hand := func(role string) {
		t.Helper()
		if err := p.Exec(p.Primary, "ALTER ROLE "+role+" PASSWORD '"+byHand+"'"); err != nil {
			t.Fatal(err)
		}
		// The replica replays it.
		for deadline := time.Now().Add(time.Minute); p.CanLogin(p.Replica, role, byHand) != nil; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the replica does not let %s in with the person's password a minute later", role)
			}
		}
		if c := roleComment(t, p, role); !strings.HasPrefix(c, ownerMark(testUID)) {
			t.Fatalf("%s carries %q after the person's change, want the set's mark kept", role, c)
		}
	}
	refused := func(err error, r reason.Reason, part string) {
		t.Helper()
		if !isRefusal(err, r) || !strings.Contains(err.Error(), part) {
			t.Fatalf("%v, want %s naming %q", err, r, part)
		}
	}
	if _, err := b.Provision(ctx, g[1]); err != nil {
		t.Fatal(err)
	}

	// The current login changed by hand; a session opened before goes on.
	c, err := p.Connect(ctx, p.Replica, "mhand_g1", g[1][KeyPassword], "postgres")
	if err != nil {
		t.Fatal(err)
	}
	hand("mhand_g1")
	if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("a session opened before the person's change ended: %v", err)
	}
	c.Close(ctx)
	waitNoSessions(t, p, "mhand_g1")
	refused(b.Precheck(ctx, g[1]), reason.KeyMismatch, "kubectl rekey recover")
	if err := b.Reset(ctx, g[1]); err != nil {
		t.Fatal(err)
	}
	assertLogins(t, p, g[1], "mhand_g1")

	// The pending login changed by hand mid-rotation.
	if _, err := b.Apply(ctx, g[1], g[2], 2); err != nil {
		t.Fatal(err)
	}
	hand("mhand_g2")
	refused(b.Verify(ctx, g[2]), reason.PendingRejected, "run kubectl rekey recover")
	refused(b.Retire(ctx, g[1], g[2]), reason.PendingRejected, "password_PENDING")
	assertLogins(t, p, g[1], "mhand_g1")
	if _, err := b.Apply(ctx, g[1], g[2], 2); err != nil {
		t.Fatal(err)
	}
	assertLogins(t, p, g[2], "mhand_g2")
	hand("mhand_g2")
	if err := p.Exec(p.Primary, "ALTER ROLE mhand_g2 PASSWORD '"+g[2][KeyPassword]+"'"); err != nil {
		t.Fatal(err)
	}
	quietVerify(t, b, g[2])
	if err := b.Retire(ctx, g[1], g[2]); err != nil {
		t.Fatal(err)
	}
	if roleExists(t, p, "mhand_g1") {
		t.Fatal("Retire left mhand_g1 once mhand_g2 was set back")
	}

	// The hand-changed current login, dropped by the discard once its
	// session (opened before the change) ended.
	if _, err := b.Apply(ctx, g[2], g[3], 3); err != nil {
		t.Fatal(err)
	}
	c, err = p.Connect(ctx, p.Primary, "mhand_g2", g[2][KeyPassword], "postgres")
	if err != nil {
		t.Fatal(err)
	}
	hand("mhand_g2")
	refused(b.Retire(ctx, g[2], g[3]), reason.DiscardRefused, "session")
	c.Close(ctx)
	waitNoSessions(t, p, "mhand_g2")
	if err := b.Retire(ctx, g[2], g[3]); err != nil {
		t.Fatal(err)
	}
	if roleExists(t, p, "mhand_g2") {
		t.Fatal("Retire left the hand-changed mhand_g2")
	}

	// Release keeps the person's password, without the mark.
	hand("mhand_g3")
	if err := b.Release(ctx, g[3]); err != nil {
		t.Fatal(err)
	}
	if err := p.CanLogin(p.Primary, "mhand_g3", byHand); err != nil {
		t.Fatalf("Release changed the person's password of mhand_g3: %v", err)
	}
	if c := roleComment(t, p, "mhand_g3"); strings.HasPrefix(c, ownerMark(testUID)) {
		t.Fatalf("Release left the mark on mhand_g3: %q", c)
	}
	if err := p.Exec(p.Primary, "DROP ROLE mhand_g3"); err != nil {
		t.Fatal(err)
	}

	// Deprovision drops a hand-changed current login.
	d := newTestBackend(t, p, testUID, "mhandd")
	d1, _ := d.NewSecrets(1)
	if _, err := d.Provision(ctx, d1); err != nil {
		t.Fatal(err)
	}
	hand("mhandd_g1")
	if err := d.Deprovision(ctx, d1); err != nil {
		t.Fatal(err)
	}
	if roleExists(t, p, "mhandd_g1") {
		t.Fatal("Deprovision left the hand-changed mhandd_g1")
	}
}

// quietVerify waits until Verify passes: the replica replays what the
// primary was just told.
func quietVerify(t *testing.T, b *Backend, s engine.Secrets) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = b.Verify(ctxT(t), s); err == nil {
			return
		}
	}
	t.Fatalf("Verify once the password was set back: %v", err)
}
