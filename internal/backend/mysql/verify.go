package mysql

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Verify implements engine.Backend: every user that can be tried from here
// logs in with its password on every instance, before consumers are given
// it. Plain connections only: nothing is changed, so no session is needed.
func (b *Backend) Verify(ctx context.Context, s engine.Secrets) error {
	var g errgroup.Group
	g.SetLimit(max(b.Concurrency, 1))
	for _, inst := range b.Instances {
		for _, u := range b.Users {
			if !u.loginCheckable() {
				continue
			}
			g.Go(func() error {
				err := b.verifyLogin(ctx, inst, u, s[u.Key])
				if err == nil {
					return nil
				}
				if !isLoginRefused(err) {
					return err // unreachable, or a certificate that does not verify
				}
				return &engine.Refusal{Reason: string(reason.PendingRejected), Message: fmt.Sprintf(
					"%s refuses the password the source Secret holds for %s, so the distribution Secrets were not changed (consumers keep what works): the source Secret was edited by hand; run kubectl rekey recover", inst.Name, u)}
			})
		}
	}
	return g.Wait()
}
