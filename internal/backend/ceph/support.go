package ceph

import (
	"context"
	"fmt"
	"regexp"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// MinRotateVersion is the first Ceph release rekey trusts to have `ceph
// auth rotate`, which strategy InPlace needs: the command came with
// Tentacle (20.x) and Squid has it from 19.2.3, the minimum Rook checks for
// as well. Older releases are refused rather than tried (a backport to
// some older point release is not something to guess at): on a mon without
// the command a rotation would stop with an error nobody can act on.
// Overlapping needs only `auth get-or-create` and `auth rm`, which every
// release has.
const MinRotateVersion = "19.2.3"

// release is the numeric part of a version as `ceph version` prints it
// ("19.2.3", also of a build such as "19.2.3-678-ge911bdeb").
var release = regexp.MustCompile(`^[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,6}`)

// inPlaceRefusal says why an in-place rotation cannot run on a mon of this
// version, nil when it can. A version rekey cannot read is refused too:
// guessing would mean trying a command that may not exist.
func inPlaceRefusal(version string) error {
	rel := release.FindString(version)
	if rel != "" && engine.CompareVersions(rel, MinRotateVersion) >= 0 {
		return nil
	}
	running := fmt.Sprintf("Ceph %s", rel)
	if rel == "" {
		running = fmt.Sprintf("a version rekey cannot read (%.40q)", version)
	}
	return &engine.Refusal{Reason: string(reason.InPlaceUnsupported), Message: fmt.Sprintf(
		"strategy InPlace rotates keys with `ceph auth rotate`, which Ceph has from %s on, and this cluster's monitor runs %s, so nothing was rotated: upgrade the monitors to %s or later (the rotation then goes ahead by itself), or, for client.* entities, set spec.ceph.strategy: Overlapping, which creates a new entity per generation and needs no `auth rotate`",
		MinRotateVersion, running, MinRotateVersion)}
}

// canRotateInPlace asks the mon for its version and refuses, before any
// key changes, when it lacks `ceph auth rotate` (Rook checks the running
// version the same way before it rotates).
func (s *session) canRotateInPlace(ctx context.Context) error {
	v, err := s.version(ctx)
	if err != nil {
		return err
	}
	return inPlaceRefusal(v)
}
