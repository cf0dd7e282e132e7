package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/leader"
	"rekey.io/rekey/internal/reason"
)

// repairRecheck: how soon an instance that could not be checked or
// repaired while Distributed is tried again, as the health gate polls.
const repairRecheck = 10 * time.Second

// repairInstances runs the repair the engine's upkeep names (the upkeep
// step RepairInstances). Its failure (an instance that does not answer, a
// refusal, a login refused) is a problem to report, not an error: the
// reconcile goes on (consumers, discard, reset) and polls.
//
// Every reconcile in Distributed repairs an instance that lost the users
// phase 1 made (rebuilt from an empty data directory): nothing else
// re-applies it before the discard, and consumers reach every instance.
// While a reset is owed, the reset would recreate them only once every
// consumer rolled out (and each further recover request restarts them
// again): until then the repair does.
func (r *Reconciler) repairInstances(ctx context.Context, t *turn, repair engine.Repair) (*problem, error) {
	switch repair {
	case engine.RepairCurrent:
		return r.idleUpkeep(ctx, t)
	case engine.RepairBoth:
		// The keys left out of the rotation in flight too, with their
		// current secret (a Repairer repairs a key without a pending one
		// as at rest).
		b, cur := t.served(t.cur)
		rp, ok := b.(engine.Repairer)
		if !ok {
			return nil, nil
		}
		// Not fenced here: it runs on every reconcile while Distributed and
		// mostly only reads; the backend asks the fence before a repair writes,
		// and the fence then also confirms the status it was decided from: a
		// repair from a stale read (a discard done since) would make the
		// discarded password valid again.
		err := rp.RepairPending(withStatusConfirmed(ctx), cur, engine.Pending(t.src.Data, t.p.backend.Keys()))
		return upkeepProblem(ctx, err, "accepts both the old and the new passwords of the rotation")
	}
	return nil, nil
}

// upkeepProblem is what a repair's failure reports: an instance that does
// not answer, a refusal, a login refused; or err itself when this manager
// stands down or lost a race. checks says what the repair checks.
func upkeepProblem(ctx context.Context, err error, checks string) (*problem, error) {
	if err == nil {
		return nil, nil
	}
	if errors.Is(err, leader.ErrNotLeader) {
		return nil, err // this manager stands down
	}
	if u, ok := engine.AsUnreachable(err); ok {
		return &problem{reason.InstanceUnreachable, fmt.Sprintf(
			"instance %s is unreachable, so rekey cannot check that it %s; nothing is lost and it resumes by itself: rekey checks again every 10 s and repairs the instance once it answers: %v", u.Instance, checks, u.Err)}, nil
	}
	if prob := classify(err); prob != nil {
		return prob, nil
	}
	if isRace(ctx, err) {
		return nil, err
	}
	// E.g. the admin refused on a rebuilt instance whose bootstrap has
	// not recreated it yet: reported, and tried again.
	return &problem{reason.BackendError, err.Error() + "; rekey checks again every 10 s"}, nil
}

// startsDiscard: d would begin discarding the old secrets. Discard records
// that it began before any instance drops anything, and from then on the
// rotation can only complete (abort and recover are refused); so it must
// not begin while an instance could not be checked or repaired: that
// instance would refuse the discard, and nothing could finish it.
func startsDiscard(d engine.Decision, st v1.CredentialSetStatus) bool {
	return d.Action == engine.Discard && !st.DiscardStarted && !st.DiscardApplied
}

type confirmKey struct{}

// withStatusConfirmed makes the set's fence (setKube.Fence) also confirm,
// before each backend write, that the status the caller acts on is the
// server's (confirmStatus): for writes that upkeep decides from status
// outside the engine's sequence, which no status write of their own
// guards.
func withStatusConfirmed(ctx context.Context) context.Context {
	return context.WithValue(ctx, confirmKey{}, true)
}

func confirmsStatus(ctx context.Context) bool {
	v, _ := ctx.Value(confirmKey{}).(bool)
	return v
}
