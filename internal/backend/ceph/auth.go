package ceph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// authEntry is one entity of the auth database as `ceph auth … --format
// json` prints it.
type authEntry struct {
	Entity string            `json:"entity"`
	Key    string            `json:"key"`
	Caps   map[string]string `json:"caps"`
}

func (e authEntry) keyring() Keyring { return Keyring{Entity: e.Entity, Key: e.Key} }

// capArgs are the `<daemon> <cap>` pairs ceph's auth commands take. Empty
// caps are left out: the mon rejects an empty cap string.
func capArgs(c v1.CephCaps) []string {
	var out []string
	for _, p := range [][2]string{{"mon", c.Mon}, {"osd", c.OSD}, {"mgr", c.MGR}, {"mds", c.MDS}} {
		if p[1] != "" {
			out = append(out, p[0], p[1])
		}
	}
	return out
}

// decodeEntry reads the single entry of `auth get`, `get-or-create` and
// `rotate`. Errors never quote the output: it holds the key.
func decodeEntry(out []byte, entity, cmd string) (authEntry, error) {
	var entries []authEntry
	if err := json.Unmarshal(out, &entries); err != nil {
		return authEntry{}, fmt.Errorf("ceph %s %s: unreadable JSON output (%d bytes)", cmd, entity, len(out))
	}
	if len(entries) != 1 || entries[0].Entity != entity || !validKey(entries[0].Key) {
		return authEntry{}, fmt.Errorf("ceph %s %s: %d entries, none with a key for it", cmd, entity, len(entries))
	}
	return entries[0], nil
}

// get reads entity from the auth database; ErrNotFound when it is absent.
func (s *session) get(ctx context.Context, entity string) (authEntry, error) {
	out, err := s.run(ctx, "auth", "get", entity, "--format", "json")
	if err != nil {
		return authEntry{}, err
	}
	return decodeEntry(out, entity, "auth get")
}

// lookup is get with absence as a result rather than an error.
func (s *session) lookup(ctx context.Context, entity string) (authEntry, bool, error) {
	e, err := s.get(ctx, entity)
	if errors.Is(err, ErrNotFound) {
		return authEntry{}, false, nil
	}
	return e, err == nil, err
}

// ensure returns entity, creating it with caps when absent. An existing
// entity is adopted as it is: get-or-create alone would refuse one whose
// caps differ from the spec's.
func (s *session) ensure(ctx context.Context, entity string, caps []string) (authEntry, error) {
	e, ok, err := s.lookup(ctx, entity)
	if err != nil || ok {
		return e, err
	}
	args := append([]string{"auth", "get-or-create", entity}, caps...)
	out, err := s.run(ctx, append(args, "--format", "json")...)
	if err != nil {
		return authEntry{}, err
	}
	return decodeEntry(out, entity, "auth get-or-create")
}

// rotate has the mon mint a new key for entity; the old one is refused at
// once. The new key comes back in the output.
func (s *session) rotate(ctx context.Context, entity string) (authEntry, error) {
	out, err := s.run(ctx, "auth", "rotate", entity, "--format", "json")
	if err != nil {
		return authEntry{}, err
	}
	return decodeEntry(out, entity, "auth rotate")
}

// remove deletes entity; deleting an absent entity succeeds.
func (s *session) remove(ctx context.Context, entity string) error {
	_, err := s.run(ctx, "auth", "rm", entity)
	return err
}

// list reads the whole auth database: the truth about which generations
// exist, whatever status says (which a crash may have left behind).
func (s *session) list(ctx context.Context) (authDump, error) {
	out, err := s.run(ctx, "auth", "ls", "--format", "json")
	if err != nil {
		return nil, err
	}
	return decodeDump(out)
}

func decodeDump(out []byte) (authDump, error) {
	var dump struct {
		AuthDump []authEntry `json:"auth_dump"`
	}
	if err := json.Unmarshal(out, &dump); err != nil {
		return nil, fmt.Errorf("ceph auth ls: unreadable JSON output (%d bytes)", len(out))
	}
	m := authDump{}
	for _, e := range dump.AuthDump {
		m[e.Entity] = e
	}
	return m, nil
}

// authDump is the auth database by entity name.
type authDump map[string]authEntry

// generations lists the generations of base that exist (0 for base
// itself), highest first.
func (d authDump) generations(base string) []int64 {
	var gens []int64
	for name := range d {
		if g, ok := generationOf(base, name); ok {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	slices.Reverse(gens)
	return gens
}

// authenticates tells whether kr's key opens a session with the mon. A
// command its caps refuse still proves the key; an entity without mon caps
// cannot open a session whatever its key, so the caller needs another check
// for those.
func (s *session) authenticates(ctx context.Context, kr Keyring) (bool, error) {
	_, err := s.runAs(ctx, kr, "fsid")
	switch {
	case err == nil, errors.Is(err, ErrDenied):
		return true, nil
	case errors.Is(err, ErrAuthFailed):
		return false, nil
	}
	return false, err
}
