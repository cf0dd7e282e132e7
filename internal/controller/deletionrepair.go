package controller

import (
	"context"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// repairBeforeRelease brings every instance to accept the current secrets
// before a Discard wind-down lets go, as an Idle set's reconcile does
// (engine.IdleRepairer). Discard leaves the current credentials valid for
// the consumers that hold them, and nothing reconciles the set afterwards:
// an instance that returned to the cluster since its last reconcile
// (rebuilt empty, or with an old volume) would refuse them for good.
// (Delete removes what rekey created once every declared consumer is gone.) A second password nobody
// accounts for is not its business here: the precheck before the wind-down
// holds the set for it (unaccountedSecond), and in a namespace being
// deleted the consumers go with it.
func repairBeforeRelease(ctx context.Context, b engine.Backend, cur engine.Secrets) error {
	rp, ok := b.(engine.IdleRepairer)
	if !ok {
		return nil
	}
	err := rp.RepairIdle(ctx, cur)
	if rf, ok := engine.AsRefusal(err); ok && rf.Reason == string(reason.DualPasswordExists) {
		return nil
	}
	return err
}
