package ceph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Ownership of entities. A cephx entity carries nothing but its key and
// caps, and caps are what clients are allowed to do: a marker there would
// have to be a cap type the mon validates (and may refuse) or a grant. So
// rekey records which set an entity is for in the mon's own
// key/value store: config-key rekey/owner/<entity> = "<set UID> <ns>/<name>".
// The record lives in the cluster, next to the entity: two sets on the
// same cluster see the same records whichever namespace they are in, and
// a record survives the loss of every Kubernetes object.
//
// rekey records an entity before it creates it (a crash in between leaves
// a record for an absent entity, which the next attempt reuses) and when
// it adopts one that exists (the keys Ceph created before rekey, a feature
// of both strategies). It rotates or deletes only entities recorded for
// this very set; one recorded for another set is refused, never adopted.
//
// A record written before rekey creates the entity ends in " minted": the
// key is rekey's own, so the version that minted it is known. Provisioning
// repeated after a crash tells by it the keys it made from the keys it
// found (adopted keys have an unknown minting version, status.keyVersion
// "").
const (
	ownerPrefix = "rekey/owner/"
	mintedMark  = "minted"
)

// Owner identifies the CredentialSet a backend acts for.
type Owner struct {
	UID string // the set's metadata.uid: a recreated set is another owner
	Set string // namespace/name, for messages
}

var ownerUID = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9]{0,63}$`)

func (o Owner) value() string { return o.UID + " " + o.Set }

// record is the value written for an entity rekey is about to create
// (minted) or adopts.
func (o Owner) record(minted bool) string {
	if minted {
		return o.value() + " " + mintedMark
	}
	return o.value()
}

// owners is the ownership records of the cluster: entity → record.
type owners map[string]string

// readOwners reads every record in one command.
func (s *session) readOwners(ctx context.Context) (owners, error) {
	out, err := s.run(ctx, "config-key", "dump", strings.TrimSuffix(ownerPrefix, "/"), "--format", "json")
	if err != nil {
		return nil, fmt.Errorf("read rekey's ownership records: %w", err)
	}
	var dump map[string]string
	if err := json.Unmarshal(out, &dump); err != nil {
		return nil, fmt.Errorf("ceph config-key dump: unreadable JSON output (%d bytes)", len(out))
	}
	o := owners{}
	for k, v := range dump {
		if e, ok := strings.CutPrefix(k, ownerPrefix); ok {
			o[e] = v
		}
	}
	return o, nil
}

// ownerOf is the set a record names ("" when there is none) and whether it
// is b's.
func (b *Backend) ownerOf(o owners, entity string) (uid, set string, mine bool) {
	rec, ok := o[entity]
	if !ok {
		return "", "", false
	}
	uid, set, _ = strings.Cut(rec, " ")
	set, _, _ = strings.Cut(set, " ") // a namespace/name holds no space
	return uid, set, uid == b.Owner.UID
}

// mintedHere tells whether entity is recorded as created by rekey for b's
// set (not adopted, nor recorded by hand).
func (b *Backend) mintedHere(o owners, entity string) bool {
	f := strings.Fields(o[entity])
	return len(f) == 3 && f[0] == b.Owner.UID && f[2] == mintedMark
}

// claim records entity for b's set: before creating it (doing "create"),
// or when adopting it. An entity recorded for another set is refused with
// what to do.
func (b *Backend) claim(ctx context.Context, s *session, o owners, entity, doing string) error {
	uid, set, mine := b.ownerOf(o, entity)
	switch {
	case mine:
		return nil
	case uid != "":
		return b.notOwned(entity, set, doing)
	}
	rec := b.Owner.record(doing == "create")
	if _, err := s.run(ctx, "config-key", "set", ownerPrefix+entity, rec); err != nil {
		return fmt.Errorf("record %s as %s's: %w", entity, b.Owner.Set, err)
	}
	o[entity] = rec
	return nil
}

// mustOwn refuses unless entity is recorded for b's set.
func (b *Backend) mustOwn(o owners, entity, doing string) error {
	_, set, mine := b.ownerOf(o, entity)
	if !mine {
		return b.notOwned(entity, set, doing)
	}
	return nil
}

// release drops entity's record once the entity is gone.
func (b *Backend) release(ctx context.Context, s *session, o owners, entity string) error {
	if _, err := s.run(ctx, "config-key", "rm", ownerPrefix+entity); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	delete(o, entity)
	return nil
}

// removeOwned deletes an entity recorded for b's set, then its record.
func (b *Backend) removeOwned(ctx context.Context, s *session, o owners, entity, doing string) error {
	if err := b.mustOwn(o, entity, doing); err != nil {
		return err
	}
	if err := s.remove(ctx, entity); err != nil {
		return err
	}
	return b.release(ctx, s, o, entity)
}

func (b *Backend) notOwned(entity, set, doing string) error {
	if set != "" {
		return &engine.Refusal{Reason: string(reason.NotOwned), Message: fmt.Sprintf(
			"%s belongs to CredentialSet %s on this cluster, not to %s, so rekey did not %s it and changed nothing: give each entity to one set. If %s no longer exists, remove its record with `ceph config-key rm %s%s`",
			entity, set, b.Owner.Set, doing, set, ownerPrefix, entity)}
	}
	return &engine.Refusal{Reason: string(reason.NotOwned), Message: fmt.Sprintf(
		"%s was not created by rekey for %s, so rekey did not %s it and changed nothing: delete it yourself (ceph auth rm %s) if it is a leftover, or, if this set should manage it, record it with `ceph config-key set %s%s \"%s\"`",
		entity, b.Owner.Set, doing, entity, ownerPrefix, entity, b.Owner.value())}
}
