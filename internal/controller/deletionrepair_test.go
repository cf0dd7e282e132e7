package controller

import (
	"context"
	"errors"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// idleRepairing is a backend whose idle repair answers err.
type idleRepairing struct {
	engine.Backend
	err   error
	calls int
}

func (b *idleRepairing) RepairIdle(context.Context, engine.Secrets) error {
	b.calls++
	return b.err
}

// TestRepairBeforeRelease: a Discard wind-down repairs the instances
// first and lets go only when that worked; a second password nobody
// accounts for is the precheck's business, not a reason to hold here.
func TestRepairBeforeRelease(t *testing.T) {
	down := errors.New("instance db-1 is unreachable")
	if err := repairBeforeRelease(context.Background(), struct{ engine.Backend }{}, nil); err != nil {
		t.Errorf("backend without idle repair: %v, want nil", err)
	}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"repaired", nil, nil},
		{"second password", &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: "orders has a second password"}, nil},
		{"failed", down, down},
	} {
		b := &idleRepairing{err: c.err}
		if got := repairBeforeRelease(context.Background(), b, engine.Secrets{}); !errors.Is(got, c.want) || (c.want == nil) != (got == nil) || b.calls != 1 {
			t.Errorf("%s: %v after %d repairs, want %v after 1", c.name, got, b.calls, c.want)
		}
	}
	other := &engine.Refusal{Reason: string(reason.InvalidSpec), Message: "no"}
	if got := repairBeforeRelease(context.Background(), &idleRepairing{err: other}, nil); got != error(other) {
		t.Errorf("another refusal: %v, want it returned", got)
	}
}
