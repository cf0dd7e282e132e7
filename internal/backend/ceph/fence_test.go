package ceph

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/leader"
)

func TestChangesCluster(t *testing.T) {
	for _, c := range []struct {
		words []string
		want  bool
	}{
		{[]string{"auth", "rotate", "client.a"}, true},
		{[]string{"auth", "get-or-create", "client.a", "mon", "allow r"}, true},
		{[]string{"auth", "rm", "client.a"}, true},
		{[]string{"auth", "caps", "client.a", "mon", "allow r"}, true},
		{[]string{"config-key", "set", "rekey/owner/client.a", "x"}, true},
		{[]string{"config-key", "rm", "rekey/owner/client.a"}, true},
		{[]string{"auth", "get", "client.a"}, false},
		{[]string{"auth", "ls"}, false},
		{[]string{"config-key", "dump", "rekey/owner"}, false},
		{[]string{"version"}, false},
	} {
		if got := changesCluster(c.words); got != c.want {
			t.Errorf("changesCluster(%v) = %v, want %v", c.words, got, c.want)
		}
	}
}

// TestFencedManagerChangesNothingOnTheRealMon: a backend whose fence
// refuses (its manager lost the leadership) reads the cluster as usual but
// runs no command that changes it: provisioning an absent entity, a
// rotation and a deletion all fail with the fence's error and leave the
// mon as it was.
func TestFencedManagerChangesNothingOnTheRealMon(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	base := "client.fenced"
	f := newFixture(t, c, overlapSpec(1, base))
	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	kr := keyringIn(t, p.Secrets, base)
	lost := errors.New("not the leader")
	f.b.Fence = func(context.Context) error { return lost }

	if _, err := f.b.Apply(ctx, p.Secrets, nil, 2); !errors.Is(err, lost) {
		t.Fatalf("Apply by a fenced manager: %v, want the fence's refusal", err)
	}
	if err := f.b.Release(ctx, p.Secrets); !errors.Is(err, lost) {
		t.Fatalf("Release by a fenced manager: %v, want the fence's refusal", err)
	}
	if err := f.b.Deprovision(ctx, p.Secrets); !errors.Is(err, lost) {
		t.Fatalf("Deprovision by a fenced manager: %v, want the fence's refusal", err)
	}
	f.wantGenerations(t, base, 1)
	f.mustAuth(t, kr, true)
	f.wantRecords(t, map[string]string{kr.Entity: f.b.Owner.record(true)})
}

// TestTermFencingOnTheRealMon: the leadership term is recorded in the
// mon's config-key store before the first command of a term that changes
// the cluster, and a manager whose term is older than the recorded one (a
// leader that stalled past its Lease and woke up after the next one
// acted) changes nothing — no in-place `auth rotate` that would kill the
// key consumers were just given, no new generation, no retired one —
// while the current and a later leader proceed.
func TestTermFencingOnTheRealMon(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	term := func(f *fixture, n int64) *fixture { f.b.Term = n; return f }

	// In place: the stale manager's rotate is refused, the key stays.
	ip := term(newFixture(t, c, inPlaceSpec("client.termip")), 200)
	p, err := ip.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The window the term leaves: from its read to the command reaching
	// the mon, about one run of the CLI (what one read takes here).
	read := time.Now()
	if got := ip.termOf(t); got != "200" {
		t.Fatalf("the recorded term is %q after a change by term 200", got)
	}
	t.Logf("one ceph CLI run (config-key get) took %s", time.Since(read).Round(time.Millisecond))
	staleIP := term(newFixture(t, c, inPlaceSpec("client.termip")), 100)
	kr := keyringIn(t, p.Secrets, "client.termip")
	if _, err := staleIP.b.Apply(ctx, p.Secrets, nil, 2); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("in-place rotate by an older term: %v, want the term's refusal", err)
	}
	ip.mustAuth(t, kr, true)

	// Overlapping: the stale manager neither creates nor retires a
	// generation; the current leader rotates, a later one retires.
	base := "client.termov"
	cur := term(newFixture(t, c, overlapSpec(0, base)), 200)
	stale := term(newFixture(t, c, overlapSpec(0, base)), 100)
	later := term(newFixture(t, c, overlapSpec(0, base)), 300)
	p, err = cur.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stale.b.Apply(ctx, p.Secrets, nil, 2); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("overlapping rotate by an older term: %v, want the term's refusal", err)
	}
	cur.wantGenerations(t, base, 1)
	next, err := cur.b.Apply(ctx, p.Secrets, nil, 2)
	if err != nil {
		t.Fatalf("rotate by the current leader: %v", err)
	}
	if err := stale.b.Retire(ctx, p.Secrets, next); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("retire by an older term: %v, want the term's refusal", err)
	}
	cur.wantGenerations(t, base, 2, 1)
	cur.mustAuth(t, keyringIn(t, p.Secrets, base), true)
	if err := later.b.Retire(ctx, p.Secrets, next); err != nil {
		t.Fatalf("retire by a later leader: %v", err)
	}
	later.wantGenerations(t, base, 2)
	if got := later.termOf(t); got != "300" {
		t.Fatalf("the recorded term is %q after a change by term 300", got)
	}
	if err := cur.b.Deprovision(ctx, next); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("deletion by the leader before the later one: %v, want the term's refusal", err)
	}
	cur.mustAuth(t, keyringIn(t, next, base), true)
	if err := later.b.Deprovision(ctx, next); err != nil {
		t.Fatal(err)
	}
	if got := later.termOf(t); got != "" {
		t.Fatalf("the set's term %q is left after its deletion", got)
	}
}

// termOf is the term recorded for f's set, "" when none.
func (f *fixture) termOf(t *testing.T) string {
	t.Helper()
	out, err := f.c.CLI(ctxFor(t), "config-key", "get", f.b.termKey())
	if err != nil {
		if strings.Contains(err.Error(), "ENOENT") || strings.Contains(err.Error(), "exit status 2") {
			return ""
		}
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
