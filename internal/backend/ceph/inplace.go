package ceph

import (
	"context"
	"fmt"
	"slices"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// Apply implements engine.Backend. Whatever the strategy, the cluster is
// asked first what is already applied: a crash may have come after Ceph
// minted a key and before the engine stored it.
func (b *Backend) Apply(ctx context.Context, cur, pending engine.Secrets, gen int64) (engine.Secrets, error) {
	s, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if b.overlap {
		return b.applyOverlapping(ctx, s, cur, gen)
	}
	return b.applyInPlace(ctx, s, cur, pending)
}

// InPlaceAction is what Apply does to one entity.
type InPlaceAction int

const (
	KeepPending InPlaceAction = iota // the cluster has the stored pending key
	RotateKey                        // the cluster still has the current key
	AdoptKey                         // a key this rotation minted before a crash lost it
	RefuseKey                        // a key nobody stored: changed outside rekey
)

// DecideInPlace picks the action from the key the cluster holds. With
// nothing pending stored, a key that is not the current one can only be
// this rotation's (minted before a crash): rotating again would throw away
// a key a restarted consumer may already use.
func DecideInPlace(cluster, cur, pending string) InPlaceAction {
	switch {
	case pending != "" && cluster == pending:
		return KeepPending
	case cluster == cur:
		return RotateKey
	case pending == "":
		return AdoptKey
	}
	return RefuseKey
}

// applyInPlace asks the cluster about every entity before rotating any, so
// that an entity it must refuse does not leave the set half rotated.
func (b *Backend) applyInPlace(ctx context.Context, s *session, cur, pending engine.Secrets) (engine.Secrets, error) {
	o, err := s.readOwners(ctx)
	if err != nil {
		return nil, err
	}
	actions := make([]InPlaceAction, len(b.entities))
	held := make([]authEntry, len(b.entities))
	for i, e := range b.entities {
		curKR, _, err := b.keyringOf(cur, e.Name, "current")
		if err != nil {
			return nil, err
		}
		var pendKey string
		if _, ok := pending[e.Name]; ok {
			kr, _, err := b.keyringOf(pending, e.Name, "pending")
			if err != nil {
				return nil, err
			}
			pendKey = kr.Key
		}
		entry, ok, err := s.lookup(ctx, e.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, mismatch("%s no longer exists in the cluster (deleted outside rekey); nothing was rotated: recreate it, or remove it from the set", e.Name)
		}
		held[i], actions[i] = entry, DecideInPlace(entry.Key, curKR.Key, pendKey)
		if actions[i] == RefuseKey {
			return nil, mismatch("the cluster's key for %s is neither the current nor the pending key the source Secret holds (changed outside rekey); nothing was rotated. Find who changed it; %s",
				e.Name, takeClusterKey(e.Name, b.Keys()))
		}
		if err := b.claim(ctx, s, o, e.Name, "rotate"); err != nil {
			return nil, err
		}
	}
	// Precheck asked already; asked again right before the first rotate,
	// because a mon answering now may be another one (an upgrade or a
	// downgrade in progress) and a refusal here still changes nothing.
	if slices.Contains(actions, RotateKey) {
		if err := s.canRotateInPlace(ctx); err != nil {
			return nil, err
		}
	}
	out := engine.Secrets{}
	for i, e := range b.entities {
		switch actions[i] {
		case KeepPending:
			out[e.Name] = pending[e.Name]
		case AdoptKey:
			out[e.Name] = held[i].keyring().String()
		case RotateKey:
			key, err := b.rotateEntity(ctx, s, e.Name)
			if err != nil {
				return nil, err
			}
			out[e.Name] = Keyring{Entity: e.Name, Key: key}.String()
		}
	}
	return out, nil
}

// rotateEntity rotates one key in place; the admin's goes through the
// rotator so that a crash cannot leave rekey without a working admin key.
func (b *Backend) rotateEntity(ctx context.Context, s *session, entity string) (string, error) {
	if entity == b.admin {
		return b.rotateAdmin(ctx, s)
	}
	failpoint.Hit("ceph/entity-rotating")
	entry, err := s.rotate(ctx, entity)
	if err != nil {
		return "", err
	}
	failpoint.Hit("ceph/entity-rotated")
	return entry.Key, nil
}

// Retire implements engine.Backend. Every pending key must open a session
// first: retiring is what makes the old keys useless, so the new ones must
// be proven to work. InPlace has nothing more to do (the old key died at
// Apply); Overlapping deletes the generations beyond keepPriorKeyCount.
func (b *Backend) Retire(ctx context.Context, cur, pending engine.Secrets) error {
	s, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	for _, e := range b.entities {
		kr, _, err := b.keyringOf(pending, e.Name, "pending")
		if err != nil {
			return err
		}
		if err := s.verifyPending(ctx, e.Name, kr, takeClusterKey(e.Name, b.Keys())); err != nil {
			return err
		}
	}
	if b.overlap {
		return b.retirePriors(ctx, s, pending, "pending")
	}
	return nil
}

// takeClusterKey is the way out of a key changed outside rekey: no reset
// can set a key Ceph minted back (and an in-place rotation cannot be
// rolled back at all), so rekey takes the cluster's (engine.ReadBackRotation
// during a rotation, engine.AddReadBack otherwise). An overlapping set reads
// back only once its source Secret holds no pending key (a rollback's reset
// still owed, say), so the message names every entity's: the reset removes
// their generations anyway.
func takeClusterKey(entity string, entities []string) string {
	return fmt.Sprintf("to take the cluster's key: during a rotation (phase Rotating or Distributed) delete %s from the source Secret; otherwise delete %s from the source Secret (with %s, if it holds them); rekey reads the key back and restarts the consumers onto it",
		engine.PendingKey(entity), entity, pendingKeys(entities))
}

// verifyPending proves kr, the keyring the source Secret holds under name,
// by logging in with it. An entity without mon caps cannot log in with any
// key; for it the cluster holding exactly kr is the best proof there is.
// way is what a refusal names as the way out.
func (s *session) verifyPending(ctx context.Context, name string, kr Keyring, way string) error {
	ok, err := s.authenticates(ctx, kr)
	if err != nil || ok {
		return err
	}
	entry, found, err := s.lookup(ctx, kr.Entity)
	if err != nil {
		return err
	}
	if found && entry.Key == kr.Key && entry.Caps["mon"] == "" {
		return nil
	}
	return &engine.Refusal{Reason: string(reason.PendingRejected), Message: fmt.Sprintf(
		"the cluster refuses the key the source Secret holds for %s (%s: changed outside rekey), so rekey changed nothing. Find who changed it; %s", name, kr.Entity, way)}
}

// Reset implements engine.Backend. InPlace cannot bring an old key back:
// the reset only succeeds when the cluster still has the current key
// (nothing was rotated). Overlapping deletes the generations newer than the
// current one.
func (b *Backend) Reset(ctx context.Context, cur engine.Secrets) error {
	s, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	if b.overlap {
		return b.resetOverlapping(ctx, s, cur)
	}
	for _, e := range b.entities {
		kr, _, err := b.keyringOf(cur, e.Name, "current")
		if err != nil {
			return err
		}
		entry, ok, err := s.lookup(ctx, e.Name)
		if err != nil {
			return err
		}
		if !ok || entry.Key != kr.Key {
			return mismatch("the cluster no longer has the current key of %s: an in-place rotation cannot be rolled back once Ceph rotated the key. Complete the rotation instead (its new key is the only one that works); with none in flight (the status or the source Secret restored from a backup, or the key rotated outside rekey), delete %s from the source Secret and rekey adopts the cluster's key and restarts the consumers onto it", e.Name, e.Name)
		}
	}
	return nil
}
