package rabbitmq

import (
	"context"
	"fmt"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// identity is the user and password a set of secrets names.
func identity(s engine.Secrets, which string) (string, string, error) {
	user, password := s[KeyUsername], s[KeyPassword]
	if user == "" || password == "" {
		return "", "", fmt.Errorf("the %s secrets lack a %s or a %s", which, KeyUsername, KeyPassword)
	}
	return user, password, nil
}

// verify proves the broker accepts what ensureUser just set.
func (b *Backend) verify(ctx context.Context, user, password string) error {
	ok, err := b.authenticates(ctx, user, password)
	if err != nil || ok {
		return err
	}
	return &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
		"user %s was set on %s but does not log in with the password rekey gave it: check that the broker's internal user database decides logins (auth_backends)", user, b.endpoint)}
}

// Provision implements engine.Backend. A user that exists already must
// carry this set's mark (rekey made it for this set, and crashed before
// the source Secret recorded the generation) and accept cur: rekey
// does not overwrite a password someone else's consumers may hold
// (another set with the same base, a user made by hand).
func (b *Backend) Provision(ctx context.Context, cur engine.Secrets) (_ engine.Provisioned, err error) {
	defer func() { err = b.redact(err, cur) }()
	user, password, err := identity(cur, "current")
	if err != nil {
		return engine.Provisioned{}, err
	}
	if user == b.adminUser {
		return engine.Provisioned{}, b.adminRefusal(user)
	}
	if b.adopt != "" && user == b.adopt {
		// spec.rabbitmq.adopt: the user exists and its services hold its
		// password; it becomes generation 1 as it is.
		if err := b.claimAdopted(ctx, user, password); err != nil {
			return engine.Provisioned{}, err
		}
		if err := b.verify(ctx, user, password); err != nil {
			return engine.Provisioned{}, err
		}
		return engine.Provisioned{Secrets: engine.Secrets{KeyUsername: user, KeyPassword: password}, Generation: 1, Adopted: true}, nil
	}
	exists, err := b.mustOwn(ctx, user, "change")
	if err != nil {
		return engine.Provisioned{}, err
	}
	if exists {
		ok, err := b.authenticates(ctx, user, password)
		if err != nil {
			return engine.Provisioned{}, err
		}
		if !ok {
			return engine.Provisioned{}, &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
				"user %s already exists on %s and does not accept the password rekey holds for it, so rekey leaves it alone (its consumers may use another password): delete the user if nobody uses it, or choose another rabbitmq.user.base", user, b.endpoint)}
		}
	}
	if err := b.ensureUser(ctx, "provision", user, password); err != nil {
		return engine.Provisioned{}, err
	}
	if err := b.verify(ctx, user, password); err != nil {
		return engine.Provisioned{}, err
	}
	gen, _ := generationOf(b.base, user)
	return engine.Provisioned{Secrets: engine.Secrets{KeyUsername: user, KeyPassword: password}, Generation: gen}, nil
}

// Precheck implements engine.Backend: the current user must log in, or
// the rotation would start from credentials nobody can use; and no other
// generation of this set may exist beside it, or the rotation would sweep
// (or re-password) a user consumers may log in as.
func (b *Backend) Precheck(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = b.redact(err, cur) }()
	user, password, err := identity(cur, "current")
	if err != nil {
		return err
	}
	// A current user without this set's mark could never be retired (Retire
	// refuses to delete it), so the rotation is refused before it starts.
	exists, err := b.mustOwn(ctx, user, "start a rotation that would delete")
	if err != nil {
		return err
	}
	if err := b.otherGeneration(ctx, user, ", then rotate again"); err != nil {
		return err
	}
	if !exists {
		return &engine.Refusal{Reason: string(reason.RotateRefused), Message: fmt.Sprintf(
			"user %s, the current user in the source Secret, does not exist on %s, so the rotation did not start: recreate it with the source Secret's password (kubectl rekey recover resets the broker to the source Secret), then rotate again", user, b.endpoint)}
	}
	ok, err := b.authenticates(ctx, user, password)
	if err != nil {
		return err
	}
	if !ok {
		return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: fmt.Sprintf(
			"user %s on %s does not accept the password the source Secret holds for it (changed outside rekey?), so the rotation did not start: once no consumer depends on the broker's password, reset the user to the source Secret's (kubectl rekey recover), then rotate again", user, b.endpoint)}
	}
	return nil
}

// otherGeneration refuses when a generation of this set other than the
// current user exists. No rotation leaves one once it completes or rolls
// back, so it is one the status does not account for: a status and source
// Secret restored from a backup taken before a rotation, while consumers
// may log in as that rotation's user. Sweeping it (a rotation's Apply, a
// deletion's wind-down) or giving its name a new password (the next
// rotation makes that generation again) would lock them out. The refusal
// is the one a MySQL user's unaccounted second password gets, and what
// holds a deleted set the same way: recover restarts the consumers onto
// the current user, then resets the broker to it. then ends the message.
func (b *Backend) otherGeneration(ctx context.Context, user, then string) error {
	names, err := b.generations(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		if n != user {
			return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: fmt.Sprintf(
				"user %s already has a login on %s beside the current user %s: a generation of this set that the status does not account for (was the status or the source Secret restored from a backup?), which consumers may log in as, so nothing was changed: reset the broker to the source Secret (kubectl rekey recover does this, once the consumers run the current user)%s", n, b.endpoint, user, then)}
		}
	}
	return nil
}

// Apply implements engine.Backend: the pending generation's user is made
// (or repaired) while the current one stays, then generations left by
// interrupted rotations are swept, since nobody was ever given them.
func (b *Backend) Apply(ctx context.Context, cur, pending engine.Secrets, gen int64) (_ engine.Secrets, err error) {
	defer func() { err = b.redact(err, cur, pending) }()
	user, password, err := identity(pending, "pending")
	if err != nil {
		return nil, err
	}
	if user == cur[KeyUsername] {
		return nil, b.sameUserRefusal(reason.RotateRefused, user)
	}
	if err := b.ensureUser(ctx, "rotate", user, password); err != nil {
		return nil, err
	}
	if err := b.verify(ctx, user, password); err != nil {
		return nil, err
	}
	if err := b.removeGenerations(ctx, "rotate", cur[KeyUsername], user); err != nil {
		return nil, err
	}
	return engine.Secrets{KeyUsername: user, KeyPassword: password}, nil
}

// Retire implements engine.Backend: the current user is deleted once the
// pending one is proven to log in, so no consumer is left with nothing. A
// user other existing sets adopted too keeps working for their consumers:
// this set only removes its mark, and the last set holding it deletes it.
func (b *Backend) Retire(ctx context.Context, cur, pending engine.Secrets) (err error) {
	defer func() { err = b.redact(err, cur, pending) }()
	user, password, err := identity(pending, "pending")
	if err != nil {
		return err
	}
	old := cur[KeyUsername]
	if old == "" {
		return fmt.Errorf("the current secrets lack a %s", KeyUsername)
	}
	if old == user {
		return b.sameUserRefusal(reason.DiscardRefused, user)
	}
	ok, err := b.authenticates(ctx, user, password)
	if err != nil {
		return err
	}
	if !ok {
		return &engine.Refusal{Reason: string(reason.PendingRejected), Message: fmt.Sprintf(
			"user %s on %s does not accept the pending password the source Secret holds, so %s was not deleted (its consumers could be locked out). The discard began and can only complete: set %s's password on the broker back to the source Secret's %s (rabbitmqctl change_password), then rekey finishes it", user, b.endpoint, old, user, engine.PendingKey(KeyPassword))}
	}
	if old == b.adminUser {
		return b.adminRefusal(old)
	}
	exists, owned, tags, err := b.lookup(ctx, old)
	if err != nil || !exists { // gone already: a Retire after a crash
		return err
	}
	if !owned {
		if b.isAdopted(old) && len(b.coOwners(tags)) > 0 {
			return nil // released already: a Retire after a crash
		}
		return b.notOwned(old, "delete", tags)
	}
	if others := b.coOwners(tags); len(others) > 0 {
		// An adopted user other sets hold too: only this set lets go.
		return b.release(ctx, "discard", old)
	}
	if err := b.deleteUser(ctx, old); err != nil {
		return err
	}
	failpoint.Hit("discard/rabbitmq-user-deleted")
	return nil
}

// Reset implements engine.Backend: the current user is repaired first, so
// that it works before anything else is deleted.
func (b *Backend) Reset(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = b.redact(err, cur) }()
	user, password, err := identity(cur, "current")
	if err != nil {
		return err
	}
	ensure := b.ensureUser
	if b.isAdopted(user) {
		// An adopted user keeps the tags and permissions it came with.
		ensure = func(ctx context.Context, _, name, password string) error { return b.resetAdopted(ctx, name, password) }
	}
	if err := ensure(ctx, "reset", user, password); err != nil {
		return err
	}
	if err := b.verify(ctx, user, password); err != nil {
		return err
	}
	return b.removeGenerations(ctx, "reset", user)
}

// Deprovision implements engine.Deprovisioner: every generation rekey made
// for this set goes. A user outside the <base>-g<N> pattern, or without
// this set's mark, was not made by rekey for this set, so it stays; an
// adopted user still current (the set never rotated) is handed back
// without this set's mark, since it existed before rekey.
func (b *Backend) Deprovision(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = b.redact(err, cur) }()
	if err := b.removeGenerations(ctx, "deprovision"); err != nil {
		return err
	}
	if user := cur[KeyUsername]; user != "" && b.isAdopted(user) {
		if err := b.release(ctx, "deprovision", user); err != nil {
			return err
		}
	}
	return b.forgetTerm(ctx)
}

// Release implements engine.Releaser: every other generation of this set
// goes (priors, leftovers of interrupted rotations), then the current user
// loses this set's mark and keeps everything else, so that its consumers
// go on and a later set may adopt it. Users without this set's mark are
// not touched, as in every sweep.
func (b *Backend) Release(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = b.redact(err, cur) }()
	user := cur[KeyUsername]
	if user == "" {
		return b.noCurrentRefusal()
	}
	if err := b.removeGenerations(ctx, "release", user); err != nil {
		return err
	}
	if err := b.release(ctx, "release", user); err != nil {
		return err
	}
	return b.forgetTerm(ctx)
}

// noCurrentRefusal: without the current user, any generation may be the
// one consumers log in as, so none is deleted.
func (b *Backend) noCurrentRefusal() error {
	return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: fmt.Sprintf(
		"the source Secret names no current user (%s is empty), so rekey cannot tell which user on %s consumers log in as and deleted none: restore the source Secret, or choose deletionPolicy Retain and delete the set's users by hand", KeyUsername, b.endpoint)}
}

func (b *Backend) sameUserRefusal(r reason.Reason, user string) error {
	return &engine.Refusal{Reason: string(r), Message: fmt.Sprintf(
		"the pending user %s is also the current user, so retiring one would delete the other: abort the rotation (kubectl rekey abort) and rotate again", user)}
}
