package postgres

import (
	"context"
	"fmt"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// Provision implements engine.Backend. A login role that exists already
// must carry this set's mark (rekey made it and crashed before the source
// Secret recorded the generation): a role someone else made is refused,
// never overwritten.
func (b *Backend) Provision(ctx context.Context, cur engine.Secrets) (_ engine.Provisioned, err error) {
	defer func() { err = safe(err) }()
	ids, err := b.checkedIdentities(cur, "current")
	if err != nil {
		return engine.Provisioned{}, err
	}
	t, err := b.topology(ctx)
	if err != nil {
		return engine.Provisioned{}, err
	}
	defer t.close(ctx)
	if err := b.requireGroups(ctx, t, ids, reason.ProvisionFailed); err != nil {
		return engine.Provisioned{}, err
	}
	// An adopted role exists and applications hold its password: it
	// becomes its login's generation 1 as it is.
	var made []identity
	adopted := false
	for _, id := range ids {
		if !id.adopted(id.user) {
			made = append(made, id)
			continue
		}
		adopted = true
		if err := b.claimAdopted(ctx, t, id.login, id.user, id.password); err != nil {
			return engine.Provisioned{}, err
		}
	}
	// apply waits for the replicas to replay every change above, too.
	if err := b.apply(ctx, t, made); err != nil {
		return engine.Provisioned{}, err
	}
	for _, id := range ids {
		if id.adopted(id.user) {
			if err := b.provenEverywhere(ctx, t, id.user, id.password, reason.ProvisionFailed, "check pg_hba.conf on that instance"); err != nil {
				return engine.Provisioned{}, err
			}
		}
	}
	gen := int64(1)
	for _, id := range made {
		g, _ := generationOf(id.base, id.user)
		gen = max(gen, g)
	}
	return engine.Provisioned{Secrets: secretsOf(ids), Generation: gen, Adopted: adopted}, nil
}

// apply makes every login of ids accept its password, waits for every
// replica to replay that, and proves each login on every instance.
func (b *Backend) apply(ctx context.Context, t *topology, ids []identity) error {
	for _, id := range ids {
		if err := b.ensureLogin(ctx, t.primary, id.group, id.user, id.password); err != nil {
			return err
		}
	}
	if err := b.waitReplay(ctx, t); err != nil {
		return err
	}
	for _, id := range ids {
		if err := b.provenEverywhere(ctx, t, id.user, id.password, reason.BackendError,
			"rekey just set it, so something else decides logins: check pg_hba.conf (scram-sha-256 or md5 for these roles) and that hosts lists one cluster"); err != nil {
			return err
		}
	}
	return nil
}

// checkedIdentities are what s holds for each login, each one of the
// set's login roles.
func (b *Backend) checkedIdentities(s engine.Secrets, which string) ([]identity, error) {
	ids, err := b.identities(s, which)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := b.checkLogin(id.login, id.user); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// checkLogin refuses secrets that do not name one of l's login roles: the
// admin, a group or anything else is never touched.
func (b *Backend) checkLogin(l login, user string) error {
	if _, ok := generationOf(l.base, user); (ok || l.adopted(user)) && user != b.adminUser {
		return nil
	}
	return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: fmt.Sprintf(
		"the source Secret names role %q under %s, which is not one of this set's login roles (%s_g<N>), so rekey changes nothing: restore the source Secret, or delete it to provision afresh", user, l.userKey(), l.base)}
}

// requireGroups refuses to go on while a login's group is missing.
func (b *Backend) requireGroups(ctx context.Context, t *topology, ids []identity, r reason.Reason) error {
	for _, id := range ids {
		if err := b.requireGroup(ctx, t.primary, id.group, r); err != nil {
			return err
		}
	}
	return nil
}

// Precheck implements engine.Backend: every current login must exist, be
// this set's and log in everywhere, or the rotation would start from
// credentials nobody can use.
func (b *Backend) Precheck(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	ids, err := b.checkedIdentities(cur, "current")
	if err != nil {
		return err
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	if err := b.requireGroups(ctx, t, ids, reason.RotateRefused); err != nil {
		return err
	}
	for _, id := range ids {
		r, err := b.lookup(ctx, t.primary, id.user)
		if err != nil {
			return err
		}
		if !r.exists {
			return &engine.Refusal{Reason: string(reason.RotateRefused), Message: fmt.Sprintf(
				"role %s, a current login in the source Secret, does not exist on %s, so the rotation did not start: kubectl rekey recover recreates it with the source Secret's password; then rotate again", id.user, t.primary.host)}
		}
		if !b.owned(r) {
			return b.notOwned(id.user, "start a rotation that would drop")
		}
		if err := b.otherGeneration(ctx, t, id, ", then rotate again"); err != nil {
			return err
		}
		if err := b.provenEverywhere(ctx, t, id.user, id.password, reason.KeyMismatch,
			"it was changed outside rekey, so the rotation did not start: once no consumer depends on the server's password, kubectl rekey recover resets it to the source Secret's; then rotate again"); err != nil {
			return err
		}
	}
	return nil
}

// Apply implements engine.Backend: the pending generation's logins are
// made (or repaired) beside the current ones, then logins left by
// interrupted rotations are dropped, since nobody was ever given them.
func (b *Backend) Apply(ctx context.Context, cur, pending engine.Secrets, _ int64) (_ engine.Secrets, err error) {
	defer func() { err = safe(err) }()
	ids, err := b.checkedIdentities(pending, "pending")
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if id.user == cur[id.userKey()] {
			return nil, b.sameLoginRefusal(reason.RotateRefused, id.user)
		}
	}
	t, err := b.topology(ctx)
	if err != nil {
		return nil, err
	}
	defer t.close(ctx)
	if err := b.requireGroups(ctx, t, ids, reason.RotateRefused); err != nil {
		return nil, err
	}
	if err := b.apply(ctx, t, ids); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := b.removeGenerations(ctx, t, id.login, reason.RotateRefused, cur[id.userKey()], id.user); err != nil {
			return nil, err
		}
	}
	return secretsOf(ids), nil
}

// Retire implements engine.Backend: the current logins are dropped once
// every pending one logs in everywhere and no session uses them. A Retire
// cut short and repeated finds the logins it dropped gone and goes on.
func (b *Backend) Retire(ctx context.Context, cur, pending engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	ids, err := b.identities(pending, "pending")
	if err != nil {
		return err
	}
	for _, id := range ids {
		old := cur[id.userKey()]
		if old == "" {
			return fmt.Errorf("the current secrets lack a %s", id.userKey())
		}
		if old == id.user {
			return b.sameLoginRefusal(reason.DiscardRefused, id.user)
		}
		if err := b.checkLogin(id.login, old); err != nil {
			return err
		}
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	for _, id := range ids {
		if err := b.provenEverywhere(ctx, t, id.user, id.password, reason.PendingRejected,
			"so "+cur[id.userKey()]+" was not dropped (its consumers could be locked out). The discard began and can only complete: set "+id.user+"'s password back to the source Secret's "+engine.PendingKey(id.passwordKey())+" (ALTER ROLE ... PASSWORD, on the primary), then rekey finishes it"); err != nil {
			return err
		}
	}
	for _, id := range ids {
		old := cur[id.userKey()]
		r, err := b.lookup(ctx, t.primary, old)
		if err != nil {
			return err
		}
		if !r.exists { // gone already: a Retire after a crash
			continue
		}
		if !b.owned(r) {
			return b.notOwned(old, "drop")
		}
		if err := b.dropLogin(ctx, t, id.group, old, reason.DiscardRefused); err != nil {
			return err
		}
	}
	return nil
}

// Reset implements engine.Backend: the current logins are repaired first,
// so that they work before anything else is dropped.
func (b *Backend) Reset(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	ids, err := b.checkedIdentities(cur, "current")
	if err != nil {
		return err
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	if err := b.requireGroups(ctx, t, ids, reason.BackendError); err != nil {
		return err
	}
	if err := b.apply(ctx, t, ids); err != nil {
		return err
	}
	failpoint.Hit("reset/postgres-login-ensured")
	for _, id := range ids {
		if err := b.removeGenerations(ctx, t, id.login, reason.AbortSkipped, id.user); err != nil {
			return err
		}
	}
	return nil
}

// Verify implements engine.Backend: every login works on every instance
// with the password the source Secret holds, before consumers are given
// it.
func (b *Backend) Verify(ctx context.Context, s engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	ids, err := b.identities(s, "distributed")
	if err != nil {
		return err
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	for _, id := range ids {
		if err := b.provenEverywhere(ctx, t, id.user, id.password, reason.PendingRejected,
			"so the distribution Secrets were not changed (consumers keep what works): the source Secret or the role was changed outside rekey; run kubectl rekey recover"); err != nil {
			return err
		}
	}
	return nil
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
	for _, l := range b.logins {
		if err := b.removeGenerations(ctx, t, l, reason.UsersInUse); err != nil {
			return err
		}
		if user := cur[l.userKey()]; l.adopted(user) {
			if err := b.release(ctx, t, user); err != nil {
				return err
			}
		}
	}
	return nil
}

// Release implements engine.Releaser: every other login role of this set
// goes once no session uses it (priors, leftovers of interrupted
// rotations), then each current login loses this set's mark and keeps its
// password and its membership in the group, so that its consumers go on
// and a later set may adopt it. Roles without this set's mark are not
// touched.
func (b *Backend) Release(ctx context.Context, cur engine.Secrets) (err error) {
	defer func() { err = safe(err) }()
	for _, l := range b.logins {
		if cur[l.userKey()] == "" {
			return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: fmt.Sprintf(
				"the source Secret names no current login (%s is empty), so rekey cannot tell which role consumers log in as and dropped none: restore the source Secret, or choose deletionPolicy Retain and drop the set's roles by hand", l.userKey())}
		}
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	for _, l := range b.logins {
		user := cur[l.userKey()]
		if err := b.removeGenerations(ctx, t, l, reason.UsersInUse, user); err != nil {
			return err
		}
		if err := b.release(ctx, t, user); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) sameLoginRefusal(r reason.Reason, user string) error {
	return &engine.Refusal{Reason: string(r), Message: fmt.Sprintf(
		"the pending login %s is also the current login, so retiring one would drop the other: abort the rotation (kubectl rekey abort) and rotate again", user)}
}
