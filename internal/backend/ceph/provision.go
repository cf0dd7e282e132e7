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
// (a key from before rekey, generation 0), else <name>.1 is created.
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
			p.Secrets[e.Name] = cur[e.Name]
			p.Generation = max(p.Generation, gen)
			continue
		}
		var (
			kr  Keyring
			gen int64
		)
		if b.overlap {
			if dump == nil {
				if dump, err = s.list(ctx); err != nil {
					return p, err
				}
			}
			kr, gen, err = b.adoptGeneration(ctx, s, o, dump, e)
		} else if err = b.claim(ctx, s, o, e.Name, "adopt"); err == nil {
			// Adopting a key that exists is a feature (daemon keys exist
			// before rekey): whoever holds the admin keyring the set names
			// can already do anything to it.
			var entry authEntry
			entry, err = s.ensure(ctx, e.Name, capArgs(e.Caps))
			kr = entry.keyring()
		}
		if err != nil {
			return p, err
		}
		p.Secrets[e.Name] = kr.String()
		p.Generation = max(p.Generation, gen)
	}
	return p, nil
}

// adoptGeneration finds or creates the entity that holds e's current key
// under Overlapping rotation.
func (b *Backend) adoptGeneration(ctx context.Context, s *session, o owners, dump authDump, e v1.CephEntity) (Keyring, int64, error) {
	gens := dump.generations(e.Name)
	if len(gens) > 0 {
		name := generationEntity(e.Name, gens[0])
		if err := b.claim(ctx, s, o, name, "adopt"); err != nil {
			return Keyring{}, 0, err
		}
		return dump[name].keyring(), gens[0], nil
	}
	name := generationEntity(e.Name, 1)
	if err := b.claim(ctx, s, o, name, "create"); err != nil {
		return Keyring{}, 0, err
	}
	entry, err := s.ensure(ctx, name, capArgs(e.Caps))
	return entry.keyring(), 1, err
}

// Precheck implements engine.Backend: a rotation starts only from the keys
// the source Secret holds. A key changed outside rekey would otherwise be
// rotated away (InPlace) or kept alive unknown (Overlapping).
func (b *Backend) Precheck(ctx context.Context, cur engine.Secrets) error {
	s, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	o, err := s.readOwners(ctx)
	if err != nil {
		return err
	}
	for _, e := range b.entities {
		kr, _, err := b.keyringOf(cur, e.Name, "current")
		if err != nil {
			return mismatch("%v; the rotation did not start: delete %s from the source Secret and rekey adopts the cluster's key, then rotate again", err, e.Name)
		}
		if err := s.holds(ctx, e.Name, kr, "adopts the cluster's key, then rotate again; the rotation did not start"); err != nil {
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
