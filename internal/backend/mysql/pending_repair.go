package mysql

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// RepairPending (engine.Repairer) keeps every instance accepting both
// passwords while the rotation is Distributed. Nothing else calls Apply in
// that phase, and consumers reach any instance (a replica Service balances
// over all of them): an instance rebuilt from an empty data directory
// (which replays binary logs that never held rekey's DDL), or one whose
// users were reset by hand, would refuse whoever lands on it for the whole
// verification window, until discard. The controller calls RepairPending
// on every reconcile in Distributed before the discard starts, so such an
// instance is repaired within one reconcile of answering again.
//
// The check is cheap when nothing is wrong: one read-only session per
// instance reading mysql.user (a user with a secondary password was
// applied, as Apply's own check says). Only an instance that needs a
// repair gets a session that lifts super_read_only, and only users that
// are neither missing nor dual are tried by logging in.
func (b *Backend) RepairPending(ctx context.Context, cur, pending engine.Secrets) error {
	if has, lacks := engine.SplitByPending(b.Keys(), pending); len(has) > 0 && len(lacks) > 0 {
		// Pending secrets for some keys only: a user listed again after
		// the rotation that went on without it left its own (the
		// engine's LeftoverRecoverID). The other users accept their
		// current secret, as at rest.
		return cmp.Or(b.only(has).repairPending(ctx, cur, pending), b.only(lacks).RepairIdle(ctx, cur))
	}
	return b.repairPending(ctx, cur, pending)
}

// repairPending makes every instance accept both cur and pending for
// every user of b.
func (b *Backend) repairPending(ctx context.Context, cur, pending engine.Secrets) error {
	passwords := b.adminPasswords(pending, cur)
	secrets := merge(cur, pending)
	var (
		mu      sync.Mutex
		unknown []string
	)
	err := b.forEachInstance(ctx, "repair/instance-checked", false, passwords, secrets, func(s *session) error {
		steps, err := b.repairSteps(ctx, s, cur, pending)
		if err != nil || len(steps) == 0 {
			return err
		}
		if b.Fence != nil {
			if err := b.Fence(ctx); err != nil {
				return &fencedError{err}
			}
		}
		w, err := openSession(ctx, "repair", true, b.fencing(), s.inst, b.transport, b.AdminUser, passwords...)
		if err != nil {
			return err
		}
		b.bind(w, secrets)
		// Decided again in the session that writes: what it acts on is
		// what MySQL says now.
		steps, err = b.repairSteps(ctx, w, cur, pending)
		if err == nil {
			var left []string
			left, err = w.repair(ctx, steps, cur, pending)
			mu.Lock()
			unknown = append(unknown, left...)
			mu.Unlock()
		}
		if cerr := w.close(ctx); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return &engine.Refusal{Reason: string(reason.PendingRejected), Message: fmt.Sprintf(
			"%s accepts neither the current nor the new password the source Secret holds, so rekey cannot tell which password its consumers hold there and changed nothing for it; the other instances accept both. If the user was changed by hand there, set it back to the current password (ALTER USER ... IDENTIFIED BY, then ALTER USER ... DISCARD OLD PASSWORD) and rekey adds the new one by itself; if the source Secret was edited, run kubectl rekey recover",
			strings.Join(unknown, ", "))}
	}
	return nil
}

// repairStep is what RepairPending does to one user on one instance.
type repairStep int

const (
	repairNone repairStep = iota
	// repairCreate: missing, or a creation a crash interrupted: created
	// accepting cur, then pending retained — Apply's path.
	repairCreate
	// repairRetain: accepts cur only (phase 1 never reached it, or it
	// was reset): pending retained — Apply's step.
	repairRetain
	// repairSwap: accepts pending only (a cluster bootstrap recreated it
	// with what the distribution Secret holds now). MySQL cannot add a
	// secondary directly, so cur is made primary keeping pending as
	// secondary, then pending primary keeping cur: each statement keeps
	// both valid, so no login is refused in between.
	repairSwap
	// repairFinishSwap: the swap's first statement ran (the user carries
	// the swapping mark): its second one.
	repairFinishSwap
	// repairUnknown: accepts neither; nothing is safe, it is reported.
	repairUnknown
	// repairStale: rekey's mark says it missed a rotation before this one
	// (its instance was away): set back to cur, then pending retained.
	repairStale
)

// needsLogin: whether deciding about a user takes a login attempt, i.e.
// mysql.user alone does not tell. A user open only to some host cannot
// be tried from here and is left as it is: discard handles it.
func needsLogin(a account, checkable bool) bool {
	return a.exists && !a.creating && !a.swapping && !a.dual && checkable
}

// decideRepair is the repair of one user from what mysql.user says of it
// and, when needsLogin, whether cur and pending log in.
func decideRepair(a account, checkable, curOK, pendingOK bool) repairStep {
	switch {
	case a.swapping:
		return repairFinishSwap
	case !a.exists || a.creating:
		return repairCreate
	case a.dual, !checkable:
		return repairNone
	case curOK:
		return repairRetain
	case pendingOK:
		return repairSwap
	}
	return repairUnknown
}

// userStep is one user's repair on one instance.
type userStep struct {
	u    User
	step repairStep
}

func (b *Backend) repairSteps(ctx context.Context, s *session, cur, pending engine.Secrets) ([]userStep, error) {
	accts, err := s.accounts(ctx, b.Users)
	if err != nil {
		return nil, err
	}
	// Logins in two rounds, each concurrent (loginAll): cur for every
	// user mysql.user does not decide, then pending for those refusing cur.
	// A user that missed what the set did before this rotation (marked
	// stale: generation.go) is set back to cur, then gets pending
	// retained; unless it accepts both already (both rounds try it): a
	// user listed again whose mark records the discard that went on
	// without it. Setting it back would refuse pending in between.
	stale := func(a account) bool { return a.exists && !a.creating && !a.swapping && staleMark(a.mark, s.gen) }
	var first []login
	for _, u := range b.Users {
		if a := of(accts, u); stale(a) && u.loginCheckable() || !stale(a) && needsLogin(a, u.loginCheckable()) {
			first = append(first, login{u, cur[u.Key]})
		}
	}
	curOK, err := accepted(first, b.loginAll(ctx, s.inst, first))
	if err != nil {
		return nil, err
	}
	var then []login
	for _, l := range first {
		if !curOK[l.u.Key] || stale(of(accts, l.u)) {
			then = append(then, login{l.u, pending[l.u.Key]})
		}
	}
	pendingOK, err := accepted(then, b.loginAll(ctx, s.inst, then))
	if err != nil {
		return nil, err
	}
	var out []userStep
	for _, u := range b.Users {
		a := of(accts, u)
		st := decideRepair(a, u.loginCheckable(), curOK[u.Key], pendingOK[u.Key])
		if stale(a) {
			st = repairStale
			if curOK[u.Key] && pendingOK[u.Key] {
				st = repairNone
			}
		}
		if st != repairNone {
			out = append(out, userStep{u, st})
		}
	}
	return out, nil
}

// accepted files by source Secret key whether MySQL accepted each login;
// the first error that says nothing about the password (the instance went
// away) is returned instead.
func accepted(logins []login, errs []error) (map[string]bool, error) {
	out := make(map[string]bool, len(logins))
	for i, l := range logins {
		switch err := errs[i]; {
		case err == nil:
			out[l.u.Key] = true
		case !isLoginRefused(err):
			return nil, err
		}
	}
	return out, nil
}

// repair carries out steps in a session that writes (session.write); it
// returns the users it could not repair (repairUnknown).
func (s *session) repair(ctx context.Context, steps []userStep, cur, pending engine.Secrets) ([]string, error) {
	var unknown []string
	for _, st := range steps {
		u := st.u
		retain := func(pw, tail string) error {
			stmt := "ALTER USER " + u.Account() + " IDENTIFIED BY " + quote(pw) + " RETAIN CURRENT PASSWORD"
			if tail != "" {
				stmt += " " + tail
			}
			return s.write(ctx, stmt)
		}
		applied := attributeTail(createdPatch(), markPatch(s.target, true))
		var err error
		switch st.step {
		case repairCreate:
			if err = s.createUser(ctx, u, cur[u.Key], s.gen); err == nil {
				err = retain(pending[u.Key], applied)
			}
		case repairRetain:
			err = retain(pending[u.Key], applied)
		case repairStale:
			// The stale mark stays until the retain: a crash in between
			// runs all three again.
			if err = s.write(ctx, "ALTER USER "+u.Account()+" IDENTIFIED BY "+quote(cur[u.Key])); err == nil {
				if err = s.write(ctx, "ALTER USER "+u.Account()+" DISCARD OLD PASSWORD"); err == nil {
					err = retain(pending[u.Key], applied)
				}
			}
		case repairSwap:
			if err = retain(cur[u.Key], "ATTRIBUTE "+swappingAttribute); err == nil {
				err = retain(pending[u.Key], applied)
			}
		case repairFinishSwap:
			err = retain(pending[u.Key], applied)
		case repairUnknown:
			unknown = append(unknown, u.String()+" on "+s.inst.Name)
		}
		if err != nil {
			return unknown, err
		}
	}
	return unknown, nil
}

var _ engine.Repairer = (*Backend)(nil)
