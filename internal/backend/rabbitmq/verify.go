package rabbitmq

import (
	"context"
	"fmt"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Verify implements engine.Backend: the user logs in with the password the
// source Secret holds, before consumers are given it.
func (b *Backend) Verify(ctx context.Context, s engine.Secrets) (err error) {
	defer func() { err = b.redact(err, s) }()
	user, password, err := identity(s, "distributed")
	if err != nil {
		return err
	}
	ok, err := b.authenticates(ctx, user, password)
	if err != nil || ok {
		return err
	}
	return &engine.Refusal{Reason: string(reason.PendingRejected), Message: fmt.Sprintf(
		"user %s on %s does not accept the password the source Secret holds for it, so the distribution Secrets were not changed (consumers keep what works): the source Secret or the broker was changed outside rekey; run kubectl rekey recover", user, b.endpoint)}
}
