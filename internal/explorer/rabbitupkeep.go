package explorer

import (
	"context"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

var _ engine.IdleRepairer = (*rabbitBackend)(nil)

// RepairIdle is the RabbitMQ backend's upkeep at rest (upkeep.go there):
// it reports a generation of the set beside the current user
// (DualPasswordExists) and a current user that does not log in with the
// source Secret's password (KeyMismatch), each naming recover, and changes
// nothing. Proven on a real rabbitmq-server by TestRepairIdleOnRealBroker.
func (b *rabbitBackend) RepairIdle(_ context.Context, cur engine.Secrets) error {
	in, err := b.broker()
	if err != nil {
		return err
	}
	user := cur[rabbitUserKey]
	for _, n := range b.generations(in) {
		if n != user {
			return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: "user " + n + " already has a login on " + broker + " beside the current user " + user + ": a generation of this set that the status does not account for (was the status or the source Secret restored from a backup?), which consumers may log in as, so nothing was changed: reset the broker to the source Secret (kubectl rekey recover does this, once the consumers run the current user)"}
		}
	}
	if a := in.acct(user); !a.Exists || !a.Accepts(cur[rabbitPasswordKey]) {
		return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: "user " + user + " on " + broker + " does not log in with the password the source Secret holds for it (changed or deleted outside rekey?), so the consumers that read the served one are refused: set it back to the source Secret's password, or, once no consumer depends on the broker's password, run kubectl rekey recover to reset the user to the source Secret's"}
	}
	return nil
}
