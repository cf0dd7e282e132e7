package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// ProveAdoption refuses, before anything is stored or changed, to adopt
// for login base a role the given password does not log in as: knowing it
// is the proof that the set's author may retire it.
func (b *Backend) ProveAdoption(ctx context.Context, base, password string) (err error) {
	defer func() { err = safe(err) }()
	l, ok := b.loginOf(base)
	if !ok || l.adopt == "" {
		return nil
	}
	t, err := b.topology(ctx)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	return b.prove(ctx, t, l, l.adopt, password)
}

// loginOf is the login of base.
func (b *Backend) loginOf(base string) (login, bool) {
	for _, l := range b.logins {
		if l.base == base {
			return l, true
		}
	}
	return login{}, false
}

func (b *Backend) prove(ctx context.Context, t *topology, l login, name, password string) error {
	field := l.adoptField
	if name == b.adminUser {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
			"%s.role %s is the admin rekey acts as, which a rotation would drop: adopt the application's login role instead", field, name)}
	}
	if password == "" {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
			"the Secret named in %s.passwordSecretRef holds an empty password for role %s, so nothing was adopted or changed: put the password applications log in with under that key", field, name)}
	}
	r, err := b.lookup(ctx, t.primary, name)
	if err != nil {
		return err
	}
	if !r.exists {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
			"role %s named in %s.role does not exist on %s, so nothing was adopted or changed: name the role applications log in as today, or remove %s to start with a new login %s",
			name, field, t.primary.host, field, loginName(l.base, 1))}
	}
	if r.mark != "" && !b.owned(r) {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
			"role %s has a comment, where rekey would record that this set owns it; rekey does not overwrite it, so nothing was adopted or changed: remove the comment (COMMENT ON ROLE %s IS NULL) if it is not another CredentialSet's, then rekey goes on",
			name, ident(name))}
	}
	ok, err := b.logsIn(ctx, t.primary.host, name, password)
	if err != nil {
		return err
	}
	if !ok {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
			"the password in the Secret named in %s.passwordSecretRef does not log in as role %s on %s, so rekey did not adopt it and changed nothing: put the password applications log in with today under that key (rekey adopts only a role whose password it is given, as proof that the role is yours to retire)",
			field, name, t.primary.host)}
	}
	return nil
}

// claimAdopted makes the adopted role this set's generation 1: it keeps
// its password, is marked as the set's, joins the group and acts as it,
// and what it owns is handed to the group in every database, so that the
// next generations reach the same objects. Its live sessions keep their
// rights through the group.
func (b *Backend) claimAdopted(ctx context.Context, t *topology, l login, name, password string) error {
	if err := b.prove(ctx, t, l, name, password); err != nil {
		return err
	}
	mark, err := literal(markTerm(b.owner, b.Term))
	if err != nil {
		return err
	}
	id := ident(name)
	group := l.group
	err = b.fenced(ctx, t.primary, "adopt role "+name, func(tx pgx.Tx) error {
		for _, st := range []string{"GRANT " + ident(group) + " TO " + id,
			"ALTER ROLE " + id + " SET role = " + quoteSetting(group),
			"COMMENT ON ROLE " + id + " IS " + mark} {
			if _, err := tx.Exec(ctx, st); err != nil {
				return b.fail(t.primary.host, "adopt role "+name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	failpoint.Hit("postgres/adopted-marked")
	dbs, err := b.databases(ctx, t.primary)
	if err != nil {
		return err
	}
	return b.fenced(ctx, t.primary, "hand what "+name+" owns to "+group, func(pgx.Tx) error {
		for _, db := range dbs {
			if err := b.reassign(ctx, t.primary.host, db, group, name); err != nil {
				return err
			}
		}
		return nil
	})
}

// release hands a role back without this set's mark, and changes nothing
// else (password, membership, settings): an adopted role still current
// existed before rekey, and the current login of a released set is left to
// its consumers, so deleting the set leaves either.
func (b *Backend) release(ctx context.Context, t *topology, name string) error {
	r, err := b.lookup(ctx, t.primary, name)
	if err != nil || !r.exists || !b.owned(r) {
		return err
	}
	err = b.fenced(ctx, t.primary, "release role "+name, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(name)+" IS NULL"); err != nil {
			return b.fail(t.primary.host, "release role "+name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// As a drop (dropLogin): a replica promoted without it would bring the
	// gone set's mark back.
	return b.waitReplay(ctx, t)
}
