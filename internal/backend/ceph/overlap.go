package ceph

import (
	"context"
	"fmt"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// applyOverlapping makes generation gen's entity of every spec entity exist
// next to the current one. get-or-create of an existing entity returns its
// key, so a crash between creating it and storing its key is recovered by
// reading it back. A generation newer than the current one that is not gen
// was left by an interrupted rotation whose key nobody stored: it goes.
func (b *Backend) applyOverlapping(ctx context.Context, s *session, cur engine.Secrets, gen int64) (engine.Secrets, error) {
	dump, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	o, err := s.readOwners(ctx)
	if err != nil {
		return nil, err
	}
	out := engine.Secrets{}
	var orphans []string
	for _, e := range b.entities {
		_, curGen, err := b.keyringOf(cur, e.Name, "current")
		if err != nil {
			return nil, err
		}
		if gen <= curGen {
			return nil, fmt.Errorf("generation %d is not newer than %s's current generation %d", gen, e.Name, curGen)
		}
		for _, g := range dump.generations(e.Name) {
			if g > curGen && g != gen {
				name := GenerationEntity(e.Name, g)
				if err := b.removeOwned(ctx, s, o, name, "delete"); err != nil {
					return nil, err
				}
				orphans = append(orphans, name)
			}
		}
		target := GenerationEntity(e.Name, gen)
		entry, ok := dump[target]
		if ok {
			// Made by this rotation before a crash, or by someone else:
			// only the first is handed to consumers.
			if err := b.mustOwn(o, target, "hand out the key of"); err != nil {
				return nil, err
			}
		} else {
			if err := b.claim(ctx, s, o, target, "create"); err != nil {
				return nil, err
			}
			if entry, err = s.ensure(ctx, target, capArgs(e.Caps)); err != nil {
				return nil, err
			}
			failpoint.Hit("ceph/generation-created")
		}
		out[e.Name] = entry.keyring().String()
	}
	if len(orphans) > 0 {
		b.report(reason.OrphanRemoved, "removed %s: generation entities an interrupted rotation created and nobody holds a key for", strings.Join(orphans, ", "))
	}
	return out, nil
}

// newerGeneration refuses when the set has a generation entity of base
// newer than the current one (current, generation gen). No rotation
// leaves one once it completes or rolls back, and one an interrupted
// rotation made before storing its key is re-read by the next Apply of
// that generation: a newer one beside a set at rest is one the status does
// not account for, a status and source Secret restored from a backup taken
// before a rotation, while consumers may hold its key. The next rotation
// would remove it as an orphan, and a deletion's wind-down with the other
// generations. The refusal is the one a MySQL user's unaccounted second
// password gets, and what holds a deleted set the same way: recover
// restarts the consumers onto the current key, then resets the cluster to
// it (resetOverlapping removes the newer generations).
func (b *Backend) newerGeneration(dump authDump, o owners, base, current string, gen int64) error {
	for _, g := range dump.generations(base) {
		name := GenerationEntity(base, g)
		if _, _, mine := b.ownerOf(o, name); g > gen && mine {
			return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: fmt.Sprintf(
				"%s already has a key beside the current %s: a generation of this set that the status does not account for (was the status or the source Secret restored from a backup?), which consumers may hold, so nothing was changed: reset the cluster to the source Secret (kubectl rekey recover does this, once the consumers run the current key), then rotate again", name, current)}
		}
	}
	return nil
}

// priorsToRetire picks, from an entity's generations (highest first, as
// authDump.generations lists them), those older than the keep generations
// just below gen. gen itself and anything newer are never picked.
func priorsToRetire(gens []int64, gen int64, keep int) []int64 {
	var doomed []int64
	kept := 0
	for _, g := range gens {
		if g >= gen {
			continue
		}
		if kept < keep {
			kept++
			continue
		}
		doomed = append(doomed, g)
	}
	return doomed
}

// retirePriors keeps the keepPriorKeyCount generations just before the
// generation that secrets names (the pending one at discard, the current
// one when a lowered keepPriorKeyCount is applied while idle) and deletes
// older ones; the bare name counts as generation 0. That generation and
// anything newer are never touched here.
func (b *Backend) retirePriors(ctx context.Context, s *session, secrets engine.Secrets, which string) error {
	dump, err := s.list(ctx)
	if err != nil {
		return err
	}
	o, err := s.readOwners(ctx)
	if err != nil {
		return err
	}
	var doomed []string
	for _, e := range b.entities {
		_, gen, err := b.keyringOf(secrets, e.Name, which)
		if err != nil {
			return err
		}
		for _, g := range priorsToRetire(dump.generations(e.Name), gen, b.keep) {
			doomed = append(doomed, GenerationEntity(e.Name, g))
		}
	}
	// Every prior is checked before any goes: a refusal leaves the
	// cluster as it was.
	for _, name := range doomed {
		if err := b.mustOwn(o, name, "delete"); err != nil {
			return err
		}
	}
	var removed []string
	for _, name := range doomed {
		if err := b.removeOwned(ctx, s, o, name, "delete"); err != nil {
			return err
		}
		failpoint.Hit("ceph/prior-removed")
		removed = append(removed, name)
	}
	if len(removed) > 0 {
		b.report(reason.PriorKeysRetired, "removed %s (keepPriorKeyCount %d)", strings.Join(removed, ", "), b.keep)
	}
	return nil
}

// TrimDue tells, from status alone, whether the set keeps more prior
// generations than keepPriorKeyCount allows while no rotation runs: what
// lowering keepPriorKeyCount leaves (Rook's last migration step, "set it
// to 0 to delete prior keys after migration"). Without it the lowered
// count would act only at the next discard. A rotation in progress is left
// alone: its discard applies the count, and a rollback must find the
// current generation's priors as they were. An unknown count (status from
// before it was kept) is due, to be read once from the cluster.
func (b *Backend) TrimDue(st v1.CredentialSetStatus) bool {
	if !b.overlap || st.KeyGeneration == 0 || st.Phase != v1.PhaseIdle && st.Phase != "" ||
		st.RotationID != "" || st.ResetPending {
		return false
	}
	return st.PriorKeyCount == nil || int(*st.PriorKeyCount) > b.keep
}

// TrimPriors applies keepPriorKeyCount to the generations before the
// current one (cur, what the source Secret holds), reading which exist
// from `ceph auth ls`. It deletes only entities recorded for this set, all
// or none (NotOwned refusal otherwise), and reports PriorKeysRetired.
// InPlace keeps no priors: nothing to do.
func (b *Backend) TrimPriors(ctx context.Context, cur engine.Secrets) error {
	if !b.overlap {
		return nil
	}
	s, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	return b.retirePriors(ctx, s, cur, "current")
}

// takeResetKey is the way out of a reset whose current key the cluster no
// longer holds: the read back makes the cluster's newest generation
// current (engine.AddReadBack), and the reset then keeps it. The read back
// runs only once the source Secret holds no pending key of any entity (an
// overlapping backend's pending keys may be valid beside the current
// ones), so the message names every entity's: the reset removes their
// generations anyway.
func takeResetKey(entity string, entities []string) string {
	return fmt.Sprintf("To take the cluster's key, delete %s from the source Secret (with %s, if it holds them): rekey reads the key back, restarts the consumers onto it, and the reset keeps it",
		entity, pendingKeys(entities))
}

// pendingKeys lists every entity's pending key and the rotation ID, as a
// sentence does: "a_PENDING, b_PENDING and ROTATION_ID".
func pendingKeys(entities []string) string {
	names := make([]string, 0, len(entities)+1)
	for _, e := range entities {
		names = append(names, engine.PendingKey(e))
	}
	names = append(names, engine.RotationIDKey)
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// resetOverlapping rolls a rotation back: the current generation must still
// work, and every newer generation entity is deleted.
func (b *Backend) resetOverlapping(ctx context.Context, s *session, cur engine.Secrets) error {
	dump, err := s.list(ctx)
	if err != nil {
		return err
	}
	o, err := s.readOwners(ctx)
	if err != nil {
		return err
	}
	var doomed []string
	for _, e := range b.entities {
		kr, curGen, err := b.keyringOf(cur, e.Name, "current")
		if err != nil {
			return err
		}
		if entry, ok := dump[kr.Entity]; !ok || entry.Key != kr.Key {
			return mismatch("the cluster no longer has the current key of %s (%s: changed outside rekey), so resetting to it would lock its consumers out; nothing was deleted. %s", e.Name, kr.Entity, takeResetKey(e.Name, b.Keys()))
		}
		for _, g := range dump.generations(e.Name) {
			if g > curGen {
				name := GenerationEntity(e.Name, g)
				if err := b.mustOwn(o, name, "delete"); err != nil {
					return err
				}
				doomed = append(doomed, name)
			}
		}
	}
	failpoint.Hit("reset/ceph-generations-doomed")
	for _, name := range doomed {
		if err := b.removeOwned(ctx, s, o, name, "delete"); err != nil {
			return err
		}
	}
	return nil
}

// Priors implements engine.Inventory: the most prior generation entities
// any spec entity still has, read from the cluster (status.priorKeyCount).
func (b *Backend) Priors(ctx context.Context, cur engine.Secrets) (int, error) {
	if !b.overlap {
		return 0, nil
	}
	s, err := b.open(ctx)
	if err != nil {
		return 0, err
	}
	defer s.close()
	dump, err := s.list(ctx)
	if err != nil {
		return 0, err
	}
	most := 0
	for _, e := range b.entities {
		_, curGen, err := b.keyringOf(cur, e.Name, "current")
		if err != nil {
			return 0, err
		}
		n := 0
		for _, g := range dump.generations(e.Name) {
			if g < curGen {
				n++
			}
		}
		most = max(most, n)
	}
	return most, nil
}
