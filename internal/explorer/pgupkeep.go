package explorer

import (
	"context"
	"fmt"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

var _ engine.IdleRepairer = (*pgBackend)(nil)

// RepairIdle is the PostgreSQL backend's upkeep at rest (upkeep.go there):
// login by login, it reports a role of the login's base beside the
// current one (DualPasswordExists) and a current login that does not log
// in with the source Secret's password on both instances (KeyMismatch),
// each naming recover, and changes nothing. Proven on a real primary and
// replica by TestRepairIdleOnRealPostgres.
func (b *pgBackend) RepairIdle(_ context.Context, cur engine.Secrets) error {
	ids, err := b.identities(cur, "current", true)
	if err != nil {
		return err
	}
	primary, err := b.topology()
	if err != nil {
		return err
	}
	for _, id := range ids {
		for _, g := range b.generations(primary, id.base) {
			if g != id.user {
				return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: fmt.Sprintf(
					"role %s already has a login on %s beside the current login %s: a generation of this set that the status does not account for (was the status or the source Secret restored from a backup?), which consumers may log in as, so nothing was changed: reset the server to the source Secret (kubectl rekey recover does this, once the consumers run the current logins)", g, primary.Name, id.user)}
			}
		}
		if err := b.proven(id.user, id.pw, reason.KeyMismatch, "it was changed or dropped outside rekey, so the consumers that read the served one are refused: set it back to the source Secret's password (ALTER ROLE, on the primary), or, once no consumer depends on the server's password, run kubectl rekey recover to reset it to the source Secret's"); err != nil {
			return err
		}
	}
	return nil
}
