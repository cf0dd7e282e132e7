package postgres

import (
	"context"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

var _ engine.IdleRepairer = (*Backend)(nil)

// RepairIdle (engine.IdleRepairer) is the upkeep of a set at rest. It
// reports, as the next rotation's precheck would refuse, a login role of
// the set beside a current login (DualPasswordExists: a status and source
// Secret restored from a backup taken before a rotation) and a current
// login that does not log in with the source Secret's password on every
// instance (KeyMismatch: changed or dropped outside rekey). Either may
// refuse consumers now, not at the next rotation: after a restore rekey
// serves the current logins again, while consumers that restarted onto
// the rotation's roles keep them, and nothing else would tell anyone that
// they run a role the status does not account for. It repairs nothing
// (only the person who changed the server knows what depends on it):
// recover restarts the consumers onto the current logins, then resets the
// server to them. Read-only: the roles of each login's base on the
// primary, and one login per instance and login.
func (b *Backend) RepairIdle(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	ids, err := b.checkedIdentities(cur, "current")
	if err != nil {
		return err
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	for _, id := range ids {
		if err := b.otherGeneration(ctx, t, id, ""); err != nil {
			return err
		}
		if err := b.provenEverywhere(ctx, t, id.user, id.password, reason.KeyMismatch,
			"it was changed or dropped outside rekey, so the consumers that read the served one are refused: set it back to the source Secret's password (ALTER ROLE, on the primary), or, once no consumer depends on the server's password, run kubectl rekey recover to reset it to the source Secret's"); err != nil {
			return err
		}
	}
	return nil
}
