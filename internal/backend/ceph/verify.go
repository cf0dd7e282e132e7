package ceph

import (
	"context"

	"rekey.io/rekey/internal/engine"
)

// Verify implements engine.Backend: every entity's key authenticates (or,
// for an entity without mon caps, is exactly the cluster's) before
// consumers are given it.
func (b *Backend) Verify(ctx context.Context, secrets engine.Secrets) error {
	s, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	for _, e := range b.entities {
		kr, _, err := b.keyringOf(secrets, e.Name, "distributed")
		if err != nil {
			return err
		}
		if err := s.verifyPending(ctx, e.Name, kr, takeClusterKey(e.Name, b.Keys())); err != nil {
			return err
		}
	}
	return nil
}
