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
// else would tell until the next rotation is refused. Overlapping, it also
// reports a generation of the set newer than the current one
// (DualPasswordExists, naming recover), as Precheck refuses it: a status
// restored from a backup taken before a rotation its consumers may run.
// It repairs nothing: the cluster's key may be in use already, and only
// the person who changed it knows; rekey takes it when its entry is
// deleted from the source Secret (it reads the key back and restarts the
// consumers onto it). One read-only session, nothing written: InPlace one
// `auth get` per entity, Overlapping one `auth ls` and the records.
func (b *Backend) RepairIdle(ctx context.Context, cur engine.Secrets) error {
	s, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	var (
		dump authDump
		o    owners
	)
	if b.overlap {
		if dump, err = s.list(ctx); err != nil {
			return err
		}
		if o, err = s.readOwners(ctx); err != nil {
			return err
		}
	}
	const then = "adopts the cluster's key and restarts the consumers onto it; rekey changed nothing"
	for _, e := range b.entities {
		if _, ok := cur[e.Name]; !ok {
			continue // being read back (engine.AddReadBack)
		}
		kr, gen, err := b.keyringOf(cur, e.Name, "current")
		if err != nil {
			return mismatch("%v: delete %s from the source Secret and rekey adopts the cluster's key and restarts the consumers onto it", err, e.Name)
		}
		if !b.overlap {
			if err := s.holds(ctx, e.Name, kr, then); err != nil {
				return err
			}
			continue
		}
		entry, ok := dump[kr.Entity]
		if err := keyHeld(e.Name, kr, entry, ok, then); err != nil {
			return err
		}
		if err := b.newerGeneration(dump, o, e.Name, kr.Entity, gen); err != nil {
			return err
		}
	}
	return nil
}
