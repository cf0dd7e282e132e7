package ceph

import (
	"context"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// Provision implements engine.Backend. An entity the source Secret already
// holds must have that key in the cluster. A missing one is adopted when
// the cluster has it and created with the spec's caps otherwise; under
// Overlapping the newest generation entity is adopted, else the bare name
// (a key from before rekey, generation 0), else <name>.<generation> is
// created.
//
// Keys rekey found rather than minted make the set Adopted (the version
// that minted them is unknown, so WithVersionUpgrade replaces them, as
// Rook does for keys from before its key tracking) and keep their own
// generation. Keys it mints carry InitialGeneration (the spec's
// keyGeneration), in the entity's name under Overlapping, so a set created
// with keyGeneration 3 starts at client.x.3 instead of rotating at once.
// Whether rekey minted a key is read from its ownership record, so a
// provisioning repeated after a crash decides the same way.
func (b *Backend) Provision(ctx context.Context, cur engine.Secrets) (engine.Provisioned, error) {
	p := engine.Provisioned{Secrets: engine.Secrets{}}
	s, err := b.open(ctx)
	if err != nil {
		return p, err
	}
	defer s.close()
	var dump authDump
	o, err := s.readOwners(ctx)
	if err != nil {
		return p, err
	}
	// First everything that exists, so that the generation of the keys to
	// mint is known before any is made.
	var (
		toMint []v1.CephEntity
		found  int64
	)
	take := func(e v1.CephEntity, kr Keyring, gen int64) {
		p.Secrets[e.Name] = kr.String()
		found = max(found, gen)
		if !b.mintedHere(o, kr.Entity) {
			p.Adopted = true
		}
	}
	for _, e := range b.entities {
		if _, ok := cur[e.Name]; ok {
			kr, gen, err := b.keyringOf(cur, e.Name, "current")
			if err != nil {
				return p, mismatch("%v: delete %s from the source Secret and rekey adopts the cluster's key", err, e.Name)
			}
			if err := s.holds(ctx, e.Name, kr, "adopts the cluster's key"); err != nil {
				return p, err
			}
			// The source Secret holds exactly the cluster's key: rekey
			// stored it for this set, so the entity is the set's (this
			// also records entities provisioned before records existed).
			if err := b.claim(ctx, s, o, kr.Entity, "adopt"); err != nil {
				return p, err
			}
			take(e, kr, gen)
			continue
		}
		if b.overlap {
			if dump == nil {
				if dump, err = s.list(ctx); err != nil {
					return p, err
				}
			}
			if gens := dump.generations(e.Name); len(gens) > 0 {
				name := GenerationEntity(e.Name, gens[0])
				if err := b.claim(ctx, s, o, name, "adopt"); err != nil {
					return p, err
				}
				take(e, dump[name].keyring(), gens[0])
				continue
			}
		} else {
			entry, ok, err := s.lookup(ctx, e.Name)
			if err != nil {
				return p, err
			}
			if ok {
				// Adopting a key that exists is a feature (daemon keys
				// exist before rekey): whoever holds the admin keyring the
				// set names can already do anything to it.
				if err := b.claim(ctx, s, o, e.Name, "adopt"); err != nil {
					return p, err
				}
				take(e, entry.keyring(), 0)
				continue
			}
		}
		toMint = append(toMint, e)
	}
	p.Generation = engine.StartGeneration(b.InitialGeneration, p.Adopted, found)
	for _, e := range toMint {
		name := e.Name
		if b.overlap {
			// Next to adopted generations the new entity takes theirs:
			// the set has one generation, and rotating moves all of it.
			name = GenerationEntity(e.Name, max(p.Generation, 1))
		}
		if err := b.claim(ctx, s, o, name, "create"); err != nil {
			return p, err
		}
		entry, err := s.ensure(ctx, name, capArgs(e.Caps))
		if err != nil {
			return p, err
		}
		p.Secrets[e.Name] = entry.keyring().String()
	}
	return p, nil
}

// Precheck implements engine.Backend: a rotation starts only from the keys
// the source Secret holds. A key changed outside rekey would otherwise be
// rotated away (InPlace) or kept alive unknown (Overlapping). InPlace also
// needs a mon that has `ceph auth rotate`: asked first, as Rook does.
func (b *Backend) Precheck(ctx context.Context, cur engine.Secrets) error {
	s, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	if !b.overlap {
		if err := s.canRotateInPlace(ctx); err != nil {
			return err
		}
	}
	o, err := s.readOwners(ctx)
	if err != nil {
		return err
	}
	var dump authDump
	if b.overlap {
		if dump, err = s.list(ctx); err != nil {
			return err
		}
	}
	for _, e := range b.entities {
		kr, gen, err := b.keyringOf(cur, e.Name, "current")
		if err != nil {
			return mismatch("%v; the rotation did not start: delete %s from the source Secret and rekey adopts the cluster's key, then rotate again", err, e.Name)
		}
		// Asked before a rotation and before a recover restarts the
		// consumers, so the text names neither.
		if err := s.holds(ctx, e.Name, kr, "adopts the cluster's key and restarts the consumers onto it; nothing was changed"); err != nil {
			return err
		}
		if err := b.newerGeneration(dump, o, e.Name, kr.Entity, gen); err != nil {
			return err
		}
		if err := b.claim(ctx, s, o, kr.Entity, "rotate"); err != nil {
			return err
		}
	}
	return nil
}

// holds refuses unless the cluster has exactly kr. The refusal names the
// entity and the next step, never a key.
func (s *session) holds(ctx context.Context, name string, kr Keyring, then string) error {
	entry, ok, err := s.lookup(ctx, kr.Entity)
	if err != nil {
		return err
	}
	return keyHeld(name, kr, entry, ok, then)
}

// keyHeld is holds on what the cluster answered for kr's entity.
func keyHeld(name string, kr Keyring, entry authEntry, ok bool, then string) error {
	if !ok {
		return mismatch("%s does not exist in the cluster, but the source Secret holds a key for it: restore it (ceph auth import) or delete %s from the source Secret and rekey %s",
			kr.Entity, name, then)
	}
	if entry.Key != kr.Key {
		return mismatch("the cluster's key for %s is not the one the source Secret holds (changed outside rekey): delete %s from the source Secret and rekey %s",
			kr.Entity, name, then)
	}
	return nil
}
