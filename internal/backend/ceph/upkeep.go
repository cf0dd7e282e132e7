package ceph

import (
	"context"

	"rekey.io/rekey/internal/engine"
)

var _ engine.IdleRepairer = (*Backend)(nil)

// RepairIdle (engine.IdleRepairer) is the upkeep of a set at rest: it asks
// the cluster whether each entity still has the key the source Secret
// holds, and reports one that does not (KeyMismatch, naming the way out).
// A key changed outside rekey (`ceph auth rotate` or `ceph auth import`
// by hand) refuses every consumer that holds the served key, and nothing
// else would tell until the next rotation is refused. It repairs nothing:
// the cluster's key may be in use already, and only the person who changed
// it knows; rekey takes it when its entry is deleted from the source
// Secret (it reads the key back and restarts the consumers onto it). One
// read-only session, nothing written.
func (b *Backend) RepairIdle(ctx context.Context, cur engine.Secrets) error {
	s, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	for _, e := range b.entities {
		if _, ok := cur[e.Name]; !ok {
			continue // being read back (engine.AddReadBack)
		}
		kr, _, err := b.keyringOf(cur, e.Name, "current")
		if err != nil {
			return mismatch("%v: delete %s from the source Secret and rekey adopts the cluster's key and restarts the consumers onto it", err, e.Name)
		}
		if err := s.holds(ctx, e.Name, kr, "adopts the cluster's key and restarts the consumers onto it; rekey changed nothing"); err != nil {
			return err
		}
	}
	return nil
}
