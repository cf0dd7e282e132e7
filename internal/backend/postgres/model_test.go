package postgres

import (
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// The decisions the explorer's PostgreSQL model (internal/explorer,
// pgmodel.go) encodes that no other test of this package shows on a real
// primary and replica.

// TestModelPrecheckRefusals: a rotation does not start from a current
// login that does not log in with the source Secret's password
// (KeyMismatch), nor from one that does not exist (RotateRefused, naming
// recover); neither refusal changes a role.
func TestModelPrecheckRefusals(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	b := newTestBackend(t, p, testUID, "mpre")
	g1, _ := b.NewSecrets(1)
	if _, err := b.Provision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	wrong := engine.Secrets{KeyUsername: "mpre_g1", KeyPassword: "not-its-password-0123456789"}
	if err := b.Precheck(ctx, wrong); !isRefusal(err, reason.KeyMismatch) {
		t.Fatalf("Precheck with a password the role refuses: %v, want KeyMismatch", err)
	}
	assertLogins(t, p, g1, "mpre_g1")
	if err := p.Exec(p.Primary, "DROP ROLE mpre_g1"); err != nil {
		t.Fatal(err)
	}
	err := b.Precheck(ctx, g1)
	if !isRefusal(err, reason.RotateRefused) || !strings.Contains(err.Error(), "kubectl rekey recover") {
		t.Fatalf("Precheck without the current role: %v, want RotateRefused naming recover", err)
	}
	if roleExists(t, p, "mpre_g1") {
		t.Fatal("a refused Precheck created mpre_g1")
	}
}

// TestModelApplySweeps: Apply drops the generations an interrupted
// rotation left (nobody was given them), after making the new one; a
// leftover with a live session is not dropped (RotateRefused, naming it),
// and the next Apply drops it once the session ended.
func TestModelApplySweeps(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	b := newTestBackend(t, p, testUID, "msw")
	var g [6]engine.Secrets
	for i := 1; i <= 5; i++ {
		g[i], _ = b.NewSecrets(int64(i))
	}
	if _, err := b.Provision(ctx, g[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, g[1], g[2], 2); err != nil { // then forgotten
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, g[1], g[3], 3); err != nil {
		t.Fatal(err)
	}
	if roleExists(t, p, "msw_g2") {
		t.Fatal("Apply left the interrupted rotation's msw_g2")
	}
	assertLogins(t, p, g[1], "msw_g1")
	assertLogins(t, p, g[3], "msw_g3")

	c, err := p.Connect(ctx, p.Replica, "msw_g3", g[3][KeyPassword], "postgres")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Apply(ctx, g[1], g[4], 4)
	if !isRefusal(err, reason.RotateRefused) || !strings.Contains(err.Error(), "msw_g3") {
		t.Fatalf("Apply beside a leftover in use: %v, want RotateRefused naming msw_g3", err)
	}
	assertLogins(t, p, g[3], "msw_g3")
	assertLogins(t, p, g[4], "msw_g4")
	c.Close(ctx)
	waitNoSessions(t, p, "msw_g3")
	if _, err := b.Apply(ctx, g[1], g[4], 4); err != nil {
		t.Fatal(err)
	}
	if roleExists(t, p, "msw_g3") {
		t.Fatal("Apply left msw_g3 once its session ended")
	}
	if err := b.Deprovision(ctx, g[1]); err != nil {
		t.Fatal(err)
	}
}

// TestModelResetRecreates: Reset recreates a current login that is
// missing, with the source Secret's password and the set's mark, on the
// primary and (replayed) the replica, and drops every other generation.
func TestModelResetRecreates(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	b := newTestBackend(t, p, testUID, "mrs")
	g1, _ := b.NewSecrets(1)
	g2, _ := b.NewSecrets(2)
	if _, err := b.Provision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.Exec(p.Primary, "DROP ROLE mrs_g1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Reset(ctx, g1); err != nil {
		t.Fatal(err)
	}
	assertLogins(t, p, g1, "mrs_g1")
	if c := roleComment(t, p, "mrs_g1"); !strings.HasPrefix(c, ownerMark(testUID)) {
		t.Fatalf("the recreated mrs_g1 carries %q, want the set's mark", c)
	}
	if roleExists(t, p, "mrs_g2") {
		t.Fatal("Reset left mrs_g2")
	}
	if err := b.Deprovision(ctx, g1); err != nil {
		t.Fatal(err)
	}
}

// TestModelDropsAwaitReplay: a replica whose replay is paused holds what it
// replayed. A drop is waited for: Retire drops the old login on the primary
// and stops Unreachable naming the replica, which still lets it in until it
// replays (a promotion then would keep it); a Reset, which sets a password,
// stops the same way. Once the replay resumed, both complete.
func TestModelDropsAwaitReplay(t *testing.T) {
	p := cluster(t)
	ctx := ctxT(t)
	b := newTestBackend(t, p, testUID, "mdr")
	g1, _ := b.NewSecrets(1)
	g2, _ := b.NewSecrets(2)
	if _, err := b.Provision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, g1, g2, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.Exec(p.Replica, "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := p.Exec(p.Replica, "SELECT pg_wal_replay_resume()"); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(resume)
	if err := b.Verify(ctx, g2); err != nil {
		t.Fatalf("Verify of a login the paused replica replayed: %v", err)
	}
	b.ReplayWait = time.Second
	err := b.Retire(ctx, g1, g2)
	if u, ok := engine.AsUnreachable(err); !ok || u.Instance != p.Replica.Addr() || !strings.Contains(err.Error(), "replayed") {
		t.Fatalf("Retire while the replica's replay is paused: %v, want the replica named as not having replayed", err)
	}
	if err := p.CanLogin(p.Primary, "mdr_g1", g1[KeyPassword]); err == nil {
		t.Fatal("mdr_g1 still logs in on the primary after Retire")
	}
	if err := p.CanLogin(p.Replica, "mdr_g1", g1[KeyPassword]); err != nil {
		t.Fatalf("the paused replica must still let mdr_g1 in (the drop is not replayed yet): %v", err)
	}
	err = b.Reset(ctx, g2)
	if u, ok := engine.AsUnreachable(err); !ok || u.Instance != p.Replica.Addr() || !strings.Contains(err.Error(), "replayed") {
		t.Fatalf("Reset while the replica does not replay: %v, want the replica named as not having replayed", err)
	}
	resume()
	b.ReplayWait = DefaultReplayWait
	deadline := time.Now().Add(time.Minute)
	for p.CanLogin(p.Replica, "mdr_g1", g1[KeyPassword]) == nil {
		if time.Now().After(deadline) {
			t.Fatal("mdr_g1 still logs in on the replica a minute after its replay resumed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := b.Retire(ctx, g1, g2); err != nil {
		t.Fatalf("Retire taken again once the replica replays: %v", err)
	}
	if err := b.Reset(ctx, g2); err != nil {
		t.Fatal(err)
	}
	assertLogins(t, p, g2, "mdr_g2")
	if err := b.Deprovision(ctx, g2); err != nil {
		t.Fatal(err)
	}
}
