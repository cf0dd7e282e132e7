package ceph

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Deleting a set. What rekey made for a set is exactly what the mon's
// ownership records name for its UID (owner.go), so deletion reads the
// records, never the spec's names alone: an entity recorded for another
// set, or not recorded at all, is never touched, and a record whose entity
// is gone already is simply dropped, which makes both methods idempotent.

var (
	_ engine.Releaser      = (*Backend)(nil)
	_ engine.Deprovisioner = (*Backend)(nil)
)

// Release implements engine.Releaser (deletionPolicy Discard). Overlapping:
// every entity recorded for the set other than those cur names goes (prior
// generations kept by keepPriorKeyCount, leftovers of interrupted
// rotations); the ones cur names stay with their keys. InPlace keeps no
// priors, so only the records go.
func (b *Backend) Release(ctx context.Context, cur engine.Secrets) error {
	return b.wind(ctx, cur, false)
}

// Deprovision implements engine.Deprovisioner (deletionPolicy Delete):
// every entity recorded as minted for the set goes, the current generation
// too. An adopted one stays as Release leaves it: kept if cur names it,
// deleted if it is a prior generation, since choosing Delete must never
// leave valid what Discard would remove.
func (b *Backend) Deprovision(ctx context.Context, cur engine.Secrets) error {
	return b.wind(ctx, cur, true)
}

// wind carries out either policy. The admin rotation comes first: an
// interrupted one left client.admin-rotator with admin caps and its keyring
// in a Secret the set owns, which goes with the set, so deletion must not
// leave the entity behind. It is finished rather than deleted: between
// `auth rotate` of the admin and storing the admin's new keyring, the
// rotator is the only key that can bring the admin back. RecoverAdmin
// finishes it (and removes the rotator), and removes a rotator whose
// keyring was never stored, which nobody can use. The controller already
// recovers before every operation; asking again keeps deletion correct on
// its own, for one `auth ls`.
func (b *Backend) wind(ctx context.Context, cur engine.Secrets, deprovision bool) error {
	held, err := b.heldEntities(cur)
	if err != nil {
		return err
	}
	if _, err := b.RecoverAdmin(ctx); err != nil {
		return err
	}
	s, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	o, err := s.readOwners(ctx)
	if err != nil {
		return err
	}
	plan := planDeletion(deletionInput{owner: b.Owner.UID, records: o, bases: b.Keys(), held: held,
		admin: b.admin, overlap: b.overlap, deprovision: deprovision})
	if len(plan.unknown) > 0 {
		return mismatch("the source Secret holds no key for %s, of which the cluster holds %s made for the set: rekey cannot tell whether a consumer runs it (a source Secret restored from a backup taken before it was added, say), so deleting the set changed nothing on the cluster. Put its current key back in the source Secret, or set spec.deletionPolicy to Retain to let the set go without changing the cluster (then delete %s by hand once no one uses it)",
			strings.Join(plan.unknown, ", "), strings.Join(plan.unknownEntities, ", "), strings.Join(plan.unknownEntities, ", "))
	}
	for _, base := range plan.guard {
		if err := b.guardCurrent(ctx, s, cur, base); err != nil {
			return err
		}
	}
	// Deletions before unmarking: a crash in between leaves records, so
	// the next attempt still knows what is the set's.
	for _, e := range plan.remove {
		if err := b.removeOwned(ctx, s, o, e, "delete"); err != nil {
			return err
		}
	}
	for _, e := range plan.unmark {
		if err := b.release(ctx, s, o, e); err != nil {
			return fmt.Errorf("remove the record of %s: %w", e, err)
		}
	}
	// Last, the set's leadership term (fence.go): nothing of the set is
	// left for a manager to fence.
	if _, err := s.run(ctx, "config-key", "rm", b.termKey()); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("remove the set's leadership term: %w", err)
	}
	b.reportDeletion(plan, deprovision)
	return nil
}

// heldEntities maps each spec entity to the entity cur holds a key for. A
// spec entity cur lacks is left out.
func (b *Backend) heldEntities(cur engine.Secrets) (map[string]string, error) {
	held := map[string]string{}
	for _, name := range b.Keys() {
		if _, ok := cur[name]; !ok {
			continue
		}
		kr, _, err := b.keyringOf(cur, name, "current")
		if err != nil {
			return nil, mismatch("%v; deleting the set changed nothing on the cluster: restore the source Secret's %s, or set spec.deletionPolicy to Retain to let the set go without changing the cluster", err, name)
		}
		held[name] = kr.Entity
	}
	return held, nil
}

// guardCurrent refuses to delete base's other generations unless the
// cluster holds the current key cur names: if it was changed outside rekey,
// a consumer may be logging in with a prior generation.
func (b *Backend) guardCurrent(ctx context.Context, s *session, cur engine.Secrets, base string) error {
	kr, _, err := b.keyringOf(cur, base, "current")
	if err != nil {
		return err
	}
	entry, ok, err := s.lookup(ctx, kr.Entity)
	if err != nil {
		return err
	}
	if !ok || entry.Key != kr.Key {
		return mismatch("the cluster does not hold the current key of %s (%s) that the source Secret holds (changed outside rekey), so deleting the set removed none of its other generations: a consumer may still use one. Restore the key (ceph auth import), or set spec.deletionPolicy to Retain to let the set go without changing the cluster", base, kr.Entity)
	}
	return nil
}

func (b *Backend) reportDeletion(p deletionPlan, deprovision bool) {
	if len(p.remove) == 0 {
		return
	}
	if deprovision {
		b.report(reason.Deprovisioned, "deleted %s: the set is deleted with deletionPolicy Delete", strings.Join(p.remove, ", "))
		return
	}
	b.report(reason.PriorKeysRetired, "deleted %s: the set is deleted with deletionPolicy Discard, and only its current keys stay", strings.Join(p.remove, ", "))
}

// deletionInput is what planDeletion decides from.
type deletionInput struct {
	owner   string            // the set's UID
	records owners            // every ownership record on the cluster
	bases   []string          // the spec's entity names
	held    map[string]string // spec entity → the entity cur holds a key for
	admin   string            // the entity rekey runs as
	overlap bool
	// deprovision: deletionPolicy Delete, else Discard.
	deprovision bool
}

// deletionPlan is what deleting the set does to the entities recorded for
// it.
type deletionPlan struct {
	remove []string // deleted, then their records dropped
	unmark []string // kept with their keys, their records dropped
	// guard: spec entities whose current key the cluster must hold before
	// any of their other generations is removed (Discard only: under
	// Delete the consumers are gone).
	guard []string
	// unknown: spec entities cur holds no key for, of which minted
	// generations (unknownEntities) are recorded (Discard only). The
	// source Secret is written before any consumer sees a key, but a
	// source Secret restored from a backup may lack a key consumers run
	// since: removing those generations could lock them out, and keeping
	// them could leave valid a key nobody was given, so nothing goes.
	unknown, unknownEntities []string
}

// planDeletion decides for every entity recorded for the set:
//   - one cur names stays under Discard; under Delete it goes if minted;
//   - another generation of a spec entity goes (Overlapping priors and
//     leftovers), adopted or not;
//   - of a spec entity cur holds no key for, an adopted one stays; a minted
//     one goes under Delete (the consumers are gone), and under Discard
//     stops the deletion (unknown): rekey cannot tell who runs it;
//   - one of no spec entity (removed from the spec since) stays under
//     Discard, since rekey cannot tell which of it is still in use, and
//     goes under Delete if minted;
//   - the admin rekey runs as always stays.
//
// Whatever stays loses its record, so that a later set may adopt it.
func planDeletion(in deletionInput) deletionPlan {
	var p deletionPlan
	guarded := map[string]bool{}
	for _, e := range slices.Sorted(maps.Keys(in.records)) {
		uid, minted := parseRecord(in.records[e])
		if uid != in.owner {
			continue
		}
		base, ok := baseOf(in.bases, e, in.overlap)
		heldEntity, isHeld := in.held[base]
		var remove bool
		switch {
		case e == in.admin:
		case !ok:
			remove = in.deprovision && minted
		case !isHeld:
			remove = minted
			if minted && !in.deprovision {
				if !slices.Contains(p.unknown, base) {
					p.unknown = append(p.unknown, base)
				}
				p.unknownEntities = append(p.unknownEntities, e)
			}
		case e == heldEntity:
			remove = in.deprovision && minted
		default:
			remove = true
			if !in.deprovision && !guarded[base] {
				guarded[base] = true
				p.guard = append(p.guard, base)
			}
		}
		if remove {
			p.remove = append(p.remove, e)
		} else {
			p.unmark = append(p.unmark, e)
		}
	}
	slices.Sort(p.guard)
	slices.Sort(p.unknown)
	return p
}

// baseOf is the spec entity e belongs to: itself under InPlace, the entity
// it is a generation of under Overlapping.
func baseOf(bases []string, e string, overlap bool) (string, bool) {
	for _, base := range bases {
		if base == e {
			return base, true
		}
		if _, ok := generationOf(base, e); ok && overlap {
			return base, true
		}
	}
	return "", false
}

// parseRecord reads an ownership record: the set's UID and whether rekey
// minted the entity.
func parseRecord(rec string) (uid string, minted bool) {
	f := strings.Fields(rec)
	if len(f) == 0 {
		return "", false
	}
	return f[0], len(f) == 3 && f[2] == mintedMark
}
