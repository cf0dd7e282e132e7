package mysql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// errDefiner: MySQL refuses to drop an account named as the DEFINER of a
// stored object, unless the dropping account holds ALLOW_NONEXISTENT_DEFINER.
const errDefiner = 4006

var (
	_ engine.Releaser      = (*Backend)(nil)
	_ engine.Deprovisioner = (*Backend)(nil)
)

// Release implements engine.Releaser: the owner's mark is removed from
// every user of the set that carries it, on every instance, so that a
// later set may adopt the users. Passwords are left alone: with no
// rotation in flight rekey left no secondary password, so one that exists
// was set by someone else, and discarding it could lock out whoever uses
// it. Users marked for another set, or not at all, are not touched.
func (b *Backend) Release(ctx context.Context, cur engine.Secrets) error {
	return b.deleteOwned(ctx, "release", cur, false)
}

// Deprovision implements engine.Deprovisioner: every user of the set that
// rekey created for it (created) is dropped on every instance, with
// sql_log_bin=0 as any credential change; the others are released as
// Release does. A user already gone is fine.
func (b *Backend) Deprovision(ctx context.Context, cur engine.Secrets) error {
	return b.deleteOwned(ctx, "deprovision", cur, true)
}

// deleteOwned reads every instance first, without lifting super_read_only,
// and decides over all of them which users to drop; only instances with
// something to change get a session that writes, where what is changed is
// read again. A re-run after a crash finds done what was done.
func (b *Backend) deleteOwned(ctx context.Context, step string, cur engine.Secrets, drop bool) error {
	if b.owner == "" {
		return errors.New("mysql: no owner (the CredentialSet's UID) to tell the users rekey created for the set")
	}
	passwords := b.deletionPasswords(cur)
	if len(cur) == 0 && !slices.ContainsFunc(passwords, func(p string) bool { return p != "" }) {
		// No admin password, as the source Secret holds none: then rekey
		// created nothing (it stores a password before any instance
		// learns it), or the wind-down already ran and emptied it.
		return nil
	}
	var (
		mu   sync.Mutex
		seen = map[string]map[string]account{} // instance → its users' rows
	)
	err := b.forEachInstance(ctx, step+"/instance-read", false, passwords, cur, func(s *session) error {
		accts, err := s.accounts(ctx, b.Users)
		mu.Lock()
		seen[s.inst.Name] = accts
		mu.Unlock()
		return err
	})
	if err != nil {
		return err
	}
	var dropped map[string]bool
	if drop {
		dropped = created(b.owner, b.AdminUser, b.Users, seen)
	}
	w := *b
	w.Instances = nil
	for _, inst := range b.Instances {
		if d, r := deletionSteps(b.owner, b.Users, seen[inst.Name], dropped); len(d)+len(r) > 0 {
			w.Instances = append(w.Instances, inst)
		}
	}
	if len(w.Instances) == 0 {
		return nil
	}
	return w.eachInstance(ctx, step+"/instance-done", passwords, cur, func(s *session) error {
		accts, err := s.accounts(ctx, b.Users)
		if err != nil {
			return err
		}
		d, r := deletionSteps(b.owner, b.Users, accts, dropped)
		// A user MySQL refuses to drop does not hold up the others' release.
		err = s.dropUsers(ctx, d)
		if _, lost := engine.AsUnreachable(err); lost {
			return err
		}
		return errors.Join(err, s.alterAll(ctx, alterations(r, ""), "ATTRIBUTE "+releasedAttribute))
	})
}

// deletionPasswords are the admin passwords to try: the current one of a
// rotated admin, then the one the spec gives (read while the set was never
// provisioned).
func (b *Backend) deletionPasswords(cur engine.Secrets) []string {
	out := b.adminPasswords(cur, nil)
	if b.AdminKey != "" && b.AdminPassword != "" {
		out = append(out, b.AdminPassword)
	}
	return out
}

// dropUsers drops each user with its own statement, all of them even after
// one failed, so that every refusal is named.
func (s *session) dropUsers(ctx context.Context, users []User) error {
	if len(users) == 0 {
		return nil
	}
	if err := s.liftForWrite(ctx); err != nil {
		return err
	}
	var errs []error
	for _, u := range users {
		_, err := s.conn.ExecContext(ctx, "DROP USER IF EXISTS "+u.Account())
		switch {
		case err == nil:
		case mysqlErrno(err) == errDefiner:
			errs = append(errs, &engine.Refusal{Reason: string(reason.UsersInUse), Message: fmt.Sprintf(
				"user %s on %s is the DEFINER of stored routines, views, triggers or events, so MySQL refuses to drop it (the admin lacks ALLOW_NONEXISTENT_DEFINER) and it stays: give those objects another DEFINER or drop them, and the deletion goes on by itself; or set deletionPolicy: Discard to keep the user", u, s.inst.Name)})
		case isConnError(err):
			return s.wrap("DROP USER "+u.Account(), err)
		default:
			errs = append(errs, s.wrap("DROP USER "+u.Account(), err))
		}
	}
	return errors.Join(errs...)
}

// created names (by source Secret key) the users rekey created for owner:
// each exists on some instance, and every instance that has it carries
// owner's mark. One that exists unmarked (or marked for another set)
// anywhere was not rekey's to begin with, whatever a re-initialised
// instance where rekey recreated it says; the admin rekey connects as is
// never one. seen holds each instance's rows.
func created(owner, admin string, users []User, seen map[string]map[string]account) map[string]bool {
	out := map[string]bool{}
	for _, u := range users {
		if u.Name == admin {
			continue
		}
		exists, mine := false, true
		for _, accts := range seen {
			if a := of(accts, u); a.exists {
				exists = true
				mine = mine && a.owner == owner
			}
		}
		if exists && mine {
			out[u.Key] = true
		}
	}
	return out
}

// deletionSteps is the work on one instance, given its rows: the users in
// drop that are still marked for owner there are dropped, the other users
// marked for owner released (their mark removed).
func deletionSteps(owner string, users []User, accts map[string]account, drop map[string]bool) (dropNow, release []User) {
	for _, u := range users {
		a := of(accts, u)
		switch {
		case !a.exists || a.owner != owner:
		case drop[u.Key]:
			dropNow = append(dropNow, u)
		default:
			release = append(release, u)
		}
	}
	return dropNow, release
}

// alterations gives every user the same clause.
func alterations(users []User, clause string) []alteration {
	out := make([]alteration, len(users))
	for i, u := range users {
		out[i] = alteration{u, clause}
	}
	return out
}
