package ceph

import (
	"context"
	"errors"
	"testing"
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
