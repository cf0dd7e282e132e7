package postgres

import (
	"context"
	"fmt"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Provision implements engine.Backend. A login role that exists already
// must carry this set's mark (rekey made it and crashed before the source
// Secret recorded the generation): a role someone else made is refused,
// never overwritten.
func (b *Backend) Provision(ctx context.Context, cur engine.Secrets) (_ engine.Provisioned, err error) {
	defer func() { err = safe(err) }()
	user, password, err := identity(cur, "current")
	if err != nil {
		return engine.Provisioned{}, err
	}
	if err := b.checkLogin(user); err != nil {
		return engine.Provisioned{}, err
	}
	t, err := b.topology(ctx)
	if err != nil {
		return engine.Provisioned{}, err
	}
	defer t.close(ctx)
	if err := b.requireGroup(ctx, t.primary, reason.ProvisionFailed); err != nil {
		return engine.Provisioned{}, err
	}
	if b.isAdopted(user) {
		// spec.postgres.adopt: the role exists and applications hold its
		// password; it becomes generation 1 as it is.
		if err := b.claimAdopted(ctx, t, user, password); err != nil {
			return engine.Provisioned{}, err
		}
		if err := b.waitReplay(ctx, t); err != nil {
			return engine.Provisioned{}, err
		}
		if err := b.provenEverywhere(ctx, t, user, password, reason.ProvisionFailed, "check pg_hba.conf on that instance"); err != nil {
			return engine.Provisioned{}, err
		}
		return engine.Provisioned{Secrets: engine.Secrets{KeyUsername: user, KeyPassword: password}, Generation: 1, Adopted: true}, nil
	}
	if err := b.apply(ctx, t, user, password); err != nil {
		return engine.Provisioned{}, err
	}
	gen, _ := generationOf(b.base, user)
	return engine.Provisioned{Secrets: engine.Secrets{KeyUsername: user, KeyPassword: password}, Generation: gen}, nil
}

// apply makes login user accept password, waits for every replica to
// replay it, and proves the login on every instance.
func (b *Backend) apply(ctx context.Context, t *topology, user, password string) error {
	if err := b.ensureLogin(ctx, t.primary, user, password); err != nil {
		return err
	}
	if err := b.waitReplay(ctx, t); err != nil {
		return err
	}
	return b.provenEverywhere(ctx, t, user, password, reason.BackendError,
		"rekey just set it, so something else decides logins: check pg_hba.conf (scram-sha-256 or md5 for these roles) and that hosts lists one cluster")
}

// checkLogin refuses secrets that do not name one of this set's login
// roles: the admin, the group or anything else is never touched.
func (b *Backend) checkLogin(user string) error {
	if _, ok := generationOf(b.base, user); (ok || b.isAdopted(user)) && user != b.adminUser {
		return nil
	}
	return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: fmt.Sprintf(
		"the source Secret names role %q, which is not one of this set's login roles (%s_g<N>), so rekey changes nothing: restore the source Secret, or delete it to provision afresh", user, b.base)}
}

// Precheck implements engine.Backend: the current login must exist, be
// this set's and log in everywhere, or the rotation would start from
// credentials nobody can use.
func (b *Backend) Precheck(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	user, password, err := identity(cur, "current")
	if err != nil {
		return err
	}
	if err := b.checkLogin(user); err != nil {
		return err
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	if err := b.requireGroup(ctx, t.primary, reason.RotateRefused); err != nil {
		return err
	}
	r, err := b.lookup(ctx, t.primary, user)
	if err != nil {
		return err
	}
	if !r.exists {
		return &engine.Refusal{Reason: string(reason.RotateRefused), Message: fmt.Sprintf(
			"role %s, the current login in the source Secret, does not exist on %s, so the rotation did not start: kubectl rekey recover recreates it with the source Secret's password; then rotate again", user, t.primary.host)}
	}
	if !b.owned(r) {
		return b.notOwned(user, "start a rotation that would drop")
	}
	return b.provenEverywhere(ctx, t, user, password, reason.KeyMismatch,
		"it was changed outside rekey, so the rotation did not start: once no consumer depends on the server's password, kubectl rekey recover resets it to the source Secret's; then rotate again")
}

// Apply implements engine.Backend: the pending generation's login is made
// (or repaired) beside the current one, then logins left by interrupted
// rotations are dropped, since nobody was ever given them.
func (b *Backend) Apply(ctx context.Context, cur, pending engine.Secrets, _ int64) (_ engine.Secrets, err error) {
	defer func() { err = safe(err) }()
	user, password, err := identity(pending, "pending")
	if err != nil {
		return nil, err
	}
	if err := b.checkLogin(user); err != nil {
		return nil, err
	}
	if user == cur[KeyUsername] {
		return nil, b.sameLoginRefusal(reason.RotateRefused, user)
	}
	t, err := b.topology(ctx)
	if err != nil {
		return nil, err
	}
	defer t.close(ctx)
	if err := b.requireGroup(ctx, t.primary, reason.RotateRefused); err != nil {
		return nil, err
	}
	if err := b.apply(ctx, t, user, password); err != nil {
		return nil, err
	}
	if err := b.removeGenerations(ctx, t, reason.RotateRefused, cur[KeyUsername], user); err != nil {
		return nil, err
	}
	return engine.Secrets{KeyUsername: user, KeyPassword: password}, nil
}

// Retire implements engine.Backend: the current login is dropped once the
// pending one logs in everywhere and no session uses the current one.
func (b *Backend) Retire(ctx context.Context, cur, pending engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	user, password, err := identity(pending, "pending")
	if err != nil {
		return err
	}
	old := cur[KeyUsername]
	if old == "" {
		return fmt.Errorf("the current secrets lack a %s", KeyUsername)
	}
	if old == user {
		return b.sameLoginRefusal(reason.DiscardRefused, user)
	}
	if err := b.checkLogin(old); err != nil {
		return err
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	if err := b.provenEverywhere(ctx, t, user, password, reason.PendingRejected,
		"so "+old+" was not dropped (its consumers could be locked out): run kubectl rekey recover to roll the rotation back"); err != nil {
		return err
	}
	r, err := b.lookup(ctx, t.primary, old)
	if err != nil || !r.exists { // gone already: a Retire after a crash
		return err
	}
	if !b.owned(r) {
		return b.notOwned(old, "drop")
	}
	return b.dropLogin(ctx, t, old, reason.DiscardRefused)
}

// Reset implements engine.Backend: the current login is repaired first, so
// that it works before anything else is dropped.
func (b *Backend) Reset(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	user, password, err := identity(cur, "current")
	if err != nil {
		return err
	}
	if err := b.checkLogin(user); err != nil {
		return err
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	if err := b.requireGroup(ctx, t.primary, reason.BackendError); err != nil {
		return err
	}
	if err := b.apply(ctx, t, user, password); err != nil {
		return err
	}
	return b.removeGenerations(ctx, t, reason.AbortSkipped, user)
}

// Verify implements engine.Backend: the login works on every instance with
// the password the source Secret holds, before consumers are given it.
func (b *Backend) Verify(ctx context.Context, s engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	user, password, err := identity(s, "distributed")
	if err != nil {
		return err
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	return b.provenEverywhere(ctx, t, user, password, reason.PendingRejected,
		"so the distribution Secrets were not changed (consumers keep what works): the source Secret or the role was changed outside rekey; run kubectl rekey recover")
}

// Deprovision implements engine.Deprovisioner: every login role rekey
// made for this set goes, once no session uses it.
func (b *Backend) Deprovision(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	if err := b.removeGenerations(ctx, t, reason.UsersInUse); err != nil {
		return err
	}
	if user := cur[KeyUsername]; b.isAdopted(user) {
		return b.release(ctx, t, user)
	}
	return nil
}

// Release implements engine.Releaser: every other login role of this set
// goes once no session uses it (priors, leftovers of interrupted
// rotations), then the current login loses this set's mark and keeps its
// password and its membership in the group, so that its consumers go on
// and a later set may adopt it. Roles without this set's mark are not
// touched.
func (b *Backend) Release(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	user := cur[KeyUsername]
	if user == "" {
		return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: fmt.Sprintf(
			"the source Secret names no current login (%s is empty), so rekey cannot tell which role consumers log in as and dropped none: restore the source Secret, or choose deletionPolicy Retain and drop the set's roles by hand", KeyUsername)}
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	if err := b.removeGenerations(ctx, t, reason.UsersInUse, user); err != nil {
		return err
	}
	return b.release(ctx, t, user)
}

// isAdopted: user is the role spec.postgres.adopt names.
func (b *Backend) isAdopted(user string) bool { return b.adopt != "" && user == b.adopt }

func (b *Backend) sameLoginRefusal(r reason.Reason, user string) error {
	return &engine.Refusal{Reason: string(r), Message: fmt.Sprintf(
		"the pending login %s is also the current login, so retiring one would drop the other: abort the rotation (kubectl rekey abort) and rotate again", user)}
}
