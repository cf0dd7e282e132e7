package ceph

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// rotatorCaps are the admin permissions the rotator needs to rotate the
// admin's key and delete itself afterwards: all of them.
var rotatorCaps = []string{"mon", "allow *", "osd", "allow *", "mds", "allow *", "mgr", "allow *"}

// KeyringStore is where the keyrings rekey itself runs with live (Secrets,
// in the controller). Every write must be durable when it returns: the
// admin rotation relies on it to never lose the one working key.
type KeyringStore interface {
	// LoadAdmin returns the admin keyring every command runs with.
	LoadAdmin(ctx context.Context) (keyring string, err error)
	SaveAdmin(ctx context.Context, keyring string) error
	// LoadRotator returns the rotator keyring, ok=false when none is
	// stored (no admin rotation under way).
	LoadRotator(ctx context.Context) (keyring string, ok bool, err error)
	SaveRotator(ctx context.Context, keyring string) error
	DeleteRotator(ctx context.Context) error
}

// rotateAdmin is Rook's admin key rotation procedure, steps 1 to 9; step 10 (status) is
// the engine's. It returns the admin's new key. A failpoint follows every
// step so that crash tests can stop the process after any of them.
func (b *Backend) rotateAdmin(ctx context.Context, s *session) (string, error) {
	entry, err := s.ensure(ctx, RotatorEntity, rotatorCaps)
	if err != nil {
		return "", fmt.Errorf("admin rotation step 1 (create %s): %w", RotatorEntity, err)
	}
	failpoint.Hit("ceph-admin/step-1")
	rotator := entry.keyring()
	if err := b.Store.SaveRotator(ctx, rotator.String()); err != nil {
		return "", fmt.Errorf("admin rotation step 2 (store the rotator keyring): %w", err)
	}
	failpoint.Hit("ceph-admin/step-2")
	return b.rotateWithRotator(ctx, s, rotator)
}

// rotateWithRotator is steps 3 (ROTATE) to 9 (CLEANUP). From step 2 on,
// the store always holds a keyring that works: the rotator's until step 8
// removes it, and by then the admin's new keyring is stored (step 7).
func (b *Backend) rotateWithRotator(ctx context.Context, s *session, rotator Keyring) (string, error) {
	key, err := b.rotateSteps(ctx, s, rotator)
	if err != nil {
		b.report(reason.AdminRotationFailed, "the rotation of %s's key stopped (%v); the stored %s keyring finishes it on the next reconcile", b.admin, err, RotatorEntity)
		return "", err
	}
	b.report(reason.AdminKeyRotated, "rotated %s's key through %s and stored the new keyring", b.admin, RotatorEntity)
	return key, nil
}

func (b *Backend) rotateSteps(ctx context.Context, s *session, rotator Keyring) (string, error) {
	if _, err := s.runAs(ctx, rotator, "auth", "ls", "--format", "json"); err != nil {
		return "", fmt.Errorf("admin rotation step 3 (%s auth ls): %w", RotatorEntity, err)
	}
	failpoint.Hit("ceph-admin/step-3")
	out, err := s.runAs(ctx, rotator, "auth", "rotate", b.admin, "--format", "json")
	if err != nil {
		return "", fmt.Errorf("admin rotation step 4 (auth rotate %s): %w", b.admin, err)
	}
	entry, err := decodeEntry(out, b.admin, "auth rotate")
	if err != nil {
		return "", fmt.Errorf("admin rotation step 4: %w", err)
	}
	failpoint.Hit("ceph-admin/step-4")
	admin := entry.keyring()
	if _, err := s.runAs(ctx, admin, "auth", "ls", "--format", "json"); err != nil {
		return "", fmt.Errorf("admin rotation step 5 (%s auth ls with its new key): %w", b.admin, err)
	}
	failpoint.Hit("ceph-admin/step-5")
	if err := s.setAdmin(admin.Key); err != nil {
		return "", fmt.Errorf("admin rotation step 6 (write the admin keyring file): %w", err)
	}
	failpoint.Hit("ceph-admin/step-6")
	if err := b.Store.SaveAdmin(ctx, admin.String()); err != nil {
		return "", fmt.Errorf("admin rotation step 7 (store the admin keyring): %w", err)
	}
	failpoint.Hit("ceph-admin/step-7")
	if err := s.remove(ctx, RotatorEntity); err != nil {
		return "", fmt.Errorf("admin rotation step 8 (auth rm %s): %w", RotatorEntity, err)
	}
	failpoint.Hit("ceph-admin/step-8")
	if err := b.cleanup(ctx); err != nil {
		return "", err
	}
	return admin.Key, nil
}

// cleanup is step 9 (CLEANUP).
func (b *Backend) cleanup(ctx context.Context) error {
	if err := b.Store.DeleteRotator(ctx); err != nil {
		return fmt.Errorf("admin rotation step 9 (delete the rotator keyring): %w", err)
	}
	failpoint.Hit("ceph-admin/step-9")
	return nil
}

// RecoverAdmin finishes an interrupted admin key rotation. The controller runs it before any other Ceph
// command of a set whose admin it may rotate: until it succeeds, the
// stored admin keyring may be one the cluster no longer accepts.
//
// With a rotator keyring stored: if the admin lists the auth database and
// the rotator is gone, only step 9 was missing (CLEANUP); otherwise,
// whether or not the admin's key still works, the rotator rotates it again
// from step 3 (ROTATE). With both the admin's key and the stored rotator's
// refused (a crash after step 8, the rotator removed, then the admin's key
// rotated by a person) nothing can finish it: the admin's refusal, naming
// its Secret, and the rotator keyring kept until the admin's works (then
// step 9). So too, the admin refused, with a stored rotator keyring that
// does not parse or a rotator whose caps a person cut; the refusal adds
// how to make the rotator usable again. Beyond Rook's procedure: a
// rotator entity in the cluster that no keyring was stored for (a crash
// between steps 1 and 2), or whose key or caps a person changed, or whose
// stored keyring does not parse, while the admin's keyring works, is
// deleted, since nothing can use it and it holds admin caps; and an admin
// whose caps were changed (PermissionDenied) gets its refusal, since no
// rotation gives it caps back.
func (b *Backend) RecoverAdmin(ctx context.Context) (recovered bool, err error) {
	text, stored, err := b.Store.LoadRotator(ctx)
	if err != nil {
		return false, fmt.Errorf("load the rotator keyring: %w", err)
	}
	s, err := b.open(ctx)
	if err != nil {
		return false, err
	}
	defer s.close()
	dump, lsErr := s.list(ctx)
	_, rotatorExists := dump[RotatorEntity]
	switch {
	case !stored && lsErr != nil:
		// A refused admin key (AuthenticationFailed, naming the Secret):
		// with no rotator keyring stored there is nothing to recover with.
		return false, lsErr
	case !stored && !rotatorExists:
		return false, nil
	case !stored:
		if err := s.remove(ctx, RotatorEntity); err != nil {
			return false, err
		}
		b.report(reason.AdminRotationRecovered, "removed %s: an admin key rotation stopped before its keyring was stored, so nothing can use it", RotatorEntity)
		return true, nil
	case isUnreachable(lsErr):
		// The rotator would talk to the same monitors: wait for them.
		return false, lsErr
	case lsErr == nil && !rotatorExists:
		if err := b.cleanup(ctx); err != nil {
			return false, err
		}
		b.report(reason.AdminRotationRecovered, "an admin key rotation had finished but for deleting the stored %s keyring; deleted it", RotatorEntity)
		return true, nil
	}
	rotator, parseErr := parseKeyringFor(text, RotatorEntity)
	if lsErr == nil && (parseErr != nil || !isRotator(dump[RotatorEntity], rotator)) {
		// A stored keyring a person broke cannot run step 3 any more than
		// a rotator they changed: the admin's keyring works, so dropRotator.
		return b.dropRotator(ctx, s, parseErr)
	}
	if parseErr != nil {
		// With the admin refused the rotator's key may be the one left (a
		// crash between steps 4 and 7): keep the text, say how to restore it.
		return false, b.rotatorUnusable(lsErr, fmt.Sprintf("does not parse (%v)", parseErr),
			fmt.Sprintf(": put %s's keyring back in %s if it still exists (ceph auth get %s)", RotatorEntity, b.rotatorSecret(), RotatorEntity))
	}
	if lsErr != nil {
		// Step 3 itself, as the probe: a rotator refused, or with caps a
		// person cut, would fail it the same way at every reconcile.
		_, err := s.runAs(ctx, rotator, "auth", "ls", "--format", "json")
		switch {
		case errors.Is(err, ErrAuthFailed):
			return false, b.rotatorUnusable(lsErr, "is refused too", "")
		case err != nil && !errors.Is(err, ErrDenied):
			return false, err
		case errors.Is(lsErr, ErrDenied):
			// The admin's key works (only caps are checked after it): a
			// rotation cannot give it caps, and would stop at step 5 after
			// rotating its key again at every reconcile. Its caps back, a
			// rotator with cut caps is dropped like a changed one.
			return false, lsErr
		case err != nil:
			return false, b.rotatorUnusable(lsErr, "authenticates but its caps refuse ceph auth ls (step 3)",
				fmt.Sprintf(": give them back (ceph auth caps %s %s)", RotatorEntity, capsText(rotatorCaps)))
		}
	}
	if _, err := b.rotateWithRotator(ctx, s, rotator); err != nil {
		return false, err
	}
	b.report(reason.AdminRotationRecovered, "finished an interrupted rotation of %s's key with the stored %s keyring", b.admin, RotatorEntity)
	return true, nil
}

// isRotator tells whether the rotator entity in the cluster is the one
// whose keyring is stored, with the caps step 1 gave it: a person's
// `ceph auth rotate` or `ceph auth caps` leaves a rotator that cannot run
// step 3.
func isRotator(e authEntry, stored Keyring) bool {
	if e.Key != stored.Key || len(e.Caps) != len(rotatorCaps)/2 {
		return false
	}
	for i := 0; i < len(rotatorCaps); i += 2 {
		if e.Caps[rotatorCaps[i]] != rotatorCaps[i+1] {
			return false
		}
	}
	return true
}

// dropRotator is steps 8 and 9 for a rotator a person changed, or whose
// stored keyring they broke (parseErr), while the admin's stored keyring
// works: the rotator is stopped before step 4 (the admin's key as it was;
// the engine's Apply starts the rotation over, from step 1) or after step
// 7 (the admin's new keyring stored; Apply adopts that key). Either way
// the admin's keyring, which the store holds, works throughout, so nothing
// is locked out; and a rotator with admin caps that no stored keyring can
// use is not left behind.
func (b *Backend) dropRotator(ctx context.Context, s *session, parseErr error) (bool, error) {
	if err := s.remove(ctx, RotatorEntity); err != nil {
		return false, err
	}
	failpoint.Hit("ceph-admin/step-8")
	if err := b.cleanup(ctx); err != nil {
		return false, err
	}
	why := "whose key or caps were changed outside rekey so that its stored keyring could not finish"
	if parseErr != nil {
		// parseErr never quotes the keyring (ParseKeyring).
		why = fmt.Sprintf("whose stored keyring does not parse (%v) so that it could not finish", parseErr)
	}
	b.report(reason.AdminRotationRecovered, "removed %s, %s the interrupted rotation of %s's key, and deleted that keyring; %s's stored keyring works, and a rotation that had not yet rotated it starts over",
		RotatorEntity, why, b.admin, b.admin)
	return true, nil
}

// rotatorUnusable is the admin's refusal (AuthenticationFailed, naming
// its Secret; or PermissionDenied, naming the caps) when the stored
// rotator keyring cannot finish the rotation either: refused (the rotator
// removed at step 8, or its key changed), unreadable, or its caps cut. Only
// the admin's keyring, current and with its caps, or the rotator made
// usable again (next, when the state has one) brings rekey back. The
// rotator keyring stays stored: nothing is changed until one of them
// works; then, the rotator gone, RecoverAdmin's CLEANUP (step 9) deletes
// it. Short: an Event's note is cut beyond 900 bytes, and the admin's
// refusal is long already.
func (b *Backend) rotatorUnusable(adminErr error, why, next string) error {
	var af *adminFailure
	if !errors.As(adminErr, &af) {
		return adminErr
	}
	r := *af.refusal
	r.Message += fmt.Sprintf("; the stored %s keyring %s, so it cannot finish the interrupted rotation%s", RotatorEntity, why, next)
	return &adminFailure{refusal: &r, cause: af.cause}
}

// rotatorSecret names where the rotator's keyring is stored.
func (b *Backend) rotatorSecret() string {
	if b.adminRef.Name == "" {
		return "the rotator keyring Secret"
	}
	return fmt.Sprintf("Secret %s key %s", RotatorSecretName(b.adminRef.Name), RotatorKeyringKey)
}

// capsText is caps as `ceph auth caps` takes them, quoted for a shell.
func capsText(caps []string) string {
	var out []string
	for i := 0; i < len(caps); i += 2 {
		out = append(out, caps[i]+" '"+caps[i+1]+"'")
	}
	return strings.Join(out, " ")
}

func isUnreachable(err error) bool {
	_, ok := engine.AsUnreachable(err)
	return ok
}
