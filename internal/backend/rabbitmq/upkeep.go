package rabbitmq

import (
	"context"
	"fmt"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

var _ engine.IdleRepairer = (*Backend)(nil)

// RepairIdle (engine.IdleRepairer) is the upkeep of a set at rest. It
// reports, as the next rotation's precheck would refuse, a generation of
// the set beside the current user (DualPasswordExists: a status and source
// Secret restored from a backup taken before a rotation) and a current
// user that does not log in with the source Secret's password (KeyMismatch:
// changed or deleted outside rekey). Either may refuse consumers now, not
// at the next rotation: after a restore rekey serves the current user
// again, while consumers that restarted onto the rotation's user keep it,
// and nothing else would tell anyone that they run a user the status does
// not account for. It repairs nothing (only the person who changed the
// broker knows what depends on it): recover restarts the consumers onto
// the current user, then resets the broker to it. Read-only: one list of
// users and one login per reconcile.
func (b *Backend) RepairIdle(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = b.redact(err, cur) }()
	user, password, err := identity(cur, "current")
	if err != nil {
		return err
	}
	if err := b.otherGeneration(ctx, user, ""); err != nil {
		return err
	}
	ok, err := b.authenticates(ctx, user, password)
	if err != nil || ok {
		return err
	}
	return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: fmt.Sprintf(
		"user %s on %s does not log in with the password the source Secret holds for it (changed or deleted outside rekey?), so the consumers that read the served one are refused: set it back to the source Secret's password, or, once no consumer depends on the broker's password, run kubectl rekey recover to reset the user to the source Secret's", user, b.endpoint)}
}
