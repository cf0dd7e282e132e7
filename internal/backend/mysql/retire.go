package mysql

import (
	"context"
	"fmt"
	"strings"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// Retire implements engine.Backend (phase 2's change to MySQL): DISCARD OLD
// PASSWORD everywhere, connecting with the pending admin password — which
// also proves it was applied. Every user is checked before anything is
// discarded on an instance: the pending password in the source Secret must
// log in, or discarding would strand the consumers that hold the one MySQL
// really has (a source Secret edited by hand). A user without a secondary
// that accepts only the current password missed phase 1 on this instance (a
// replica cloned from a donor that had not applied it): it gets pending
// retained first. A missing user (an instance re-initialised after phase 1)
// is created accepting pending only, if another instance accepts pending.
func (b *Backend) Retire(ctx context.Context, cur, pending engine.Secrets) error {
	// The health gate, before any instance discards anything.
	if err := b.CheckDiscardHealth(ctx, cur, pending); err != nil {
		return err
	}
	return b.eachInstance(ctx, "discard/instance-retired", b.adminPasswords(pending, cur), merge(cur, pending), func(s *session) error {
		accts, err := s.accounts(ctx, b.Users)
		if err != nil {
			return err
		}
		// A user that missed what the set did before this rotation (an
		// instance back from a scale-in) holds cur again first; the plan
		// below then takes it for one that missed phase 1.
		if reset, err := s.resetStale(ctx, b.Users, accts, cur); err != nil {
			return err
		} else if reset {
			if accts, err = s.accounts(ctx, b.Users); err != nil {
				return err
			}
		}
		// Not writable while rekey logs in (see session.write).
		if err := s.settle(ctx); err != nil {
			return err
		}
		failpoint.Hit(s.step + "/logging-in")
		for _, u := range b.Users {
			if !of(accts, u).exists && u.loginCheckable() && !b.acceptedElsewhere(ctx, s.inst, u, pending[u.Key]) {
				return &engine.Refusal{Reason: string(reason.DiscardRefused), Message: missingRefusal(s.inst, u)}
			}
		}
		// Logins in two rounds, each concurrent: the current password is
		// tried only for a user that refuses pending and has no secondary
		// (it missed phase 1?), never for one already discarded, whose
		// refused login could count towards FAILED_LOGIN_ATTEMPTS.
		first := pendingLogins(b.Users, accts, pending)
		pendingErrs := byKey(first, b.loginAll(ctx, s.inst, first))
		then := curLogins(b.Users, accts, pendingErrs, cur)
		curErrs := byKey(then, b.loginAll(ctx, s.inst, then))
		plan, err := planRetire(s.inst.Name, b.Users, accts, pendingErrs, curErrs)
		if err != nil {
			return err
		}
		for _, u := range plan.create {
			if err := s.createUser(ctx, u, pending[u.Key], s.target); err != nil {
				return err
			}
		}
		// Every retain before any discard: a user in both (half a swap,
		// or one that missed phase 1) must hold pending as its primary
		// before its secondary goes. If the retain fails, nothing is
		// discarded here.
		var retains, discards []alteration
		for _, u := range plan.retain {
			retains = append(retains, alteration{u, "IDENTIFIED BY " + quote(pending[u.Key]) + " RETAIN CURRENT PASSWORD"})
		}
		for _, u := range plan.discard {
			discards = append(discards, alteration{u, "DISCARD OLD PASSWORD"})
		}
		// ATTRIBUTE clears a swap's mark in the same statement.
		if err := s.alterAll(ctx, retains, attributeTail(createdPatch(), markPatch(s.target, true))); err != nil {
			return err
		}
		return s.alterAll(ctx, discards, attributeTail(markPatch(s.target, false)))
	})
}

// retirePlan is Retire's work on one instance: the users to create
// accepting pending (missing, or a creation to finish), those to retain
// pending for, and those whose old password to discard, each in the
// order of the spec.
type retirePlan struct{ create, retain, discard []User }

// pendingLogins: pending is tried for every user that exists, can be
// tried from here, and is not half way through a swap (whose pending is
// the secondary: it logs in either way).
func pendingLogins(users []User, accts map[string]account, pending map[string]string) []login {
	var out []login
	for _, u := range users {
		if a := of(accts, u); a.exists && !a.swapping && u.loginCheckable() {
			out = append(out, login{u, pending[u.Key]})
		}
	}
	return out
}

// curLogins: cur is tried for every user that refused pending and has no
// secondary: one that missed phase 1 on this instance accepts it.
func curLogins(users []User, accts map[string]account, pendingErrs map[string]error, cur map[string]string) []login {
	var out []login
	for _, u := range users {
		if err, tried := pendingErrs[u.Key]; tried && isLoginRefused(err) && !of(accts, u).dual {
			out = append(out, login{u, cur[u.Key]})
		}
	}
	return out
}

// byKey files login results under their user's source Secret key.
func byKey(logins []login, errs []error) map[string]error {
	out := make(map[string]error, len(logins))
	for i, l := range logins {
		out[l.u.Key] = errs[i]
	}
	return out
}

// planRetire decides Retire's work on instance inst from mysql.user's rows
// (accts) and the logins tried (pendingErrs, curErrs: nil accepted, a
// *loginRefused refused, absent not tried). Nothing is discarded on an
// instance where a user refuses pending and is not one that missed phase
// 1: the refusal names every such user. A login that says nothing about
// the password (the instance went away) is returned as it is, for the
// phase to be retried, unless a refusal is to be reported.
func planRetire(inst string, users []User, accts map[string]account, pendingErrs, curErrs map[string]error) (retirePlan, error) {
	var p retirePlan
	var refused []string
	var other error
	var finishing []User // creations to finish, after the missing users
	for _, u := range users {
		a := of(accts, u)
		switch {
		case !a.exists:
			p.create = append(p.create, u)
			continue
		case a.creating:
			finishing = append(finishing, u)
		case a.swapping:
			// Half a RepairPending swap: cur is primary, pending the
			// secondary that DISCARD would drop. The swap's second
			// statement (the retain) first.
			p.retain, p.discard = append(p.retain, u), append(p.discard, u)
			continue
		}
		if !u.loginCheckable() {
			if a.dual {
				p.discard = append(p.discard, u)
			}
			continue
		}
		pendingErr, tried := pendingErrs[u.Key]
		if !tried {
			pendingErr = &loginRefused{inst: inst, user: u.Name} // not proven: refuse
		}
		curErr, curTried := curErrs[u.Key]
		if !curTried {
			curErr = &loginRefused{inst: inst, user: u.Name}
		}
		switch {
		case pendingErr != nil && !isLoginRefused(pendingErr):
			other = firstOf(other, pendingErr)
		case pendingErr == nil && a.dual:
			p.discard = append(p.discard, u)
		case pendingErr == nil:
			// discarded already
		case a.dual:
			refused = append(refused, u.String())
		case curErr != nil && !isLoginRefused(curErr):
			other = firstOf(other, curErr)
		case curErr == nil:
			// Missed phase 1 here: pending retained first, then discard.
			p.retain, p.discard = append(p.retain, u), append(p.discard, u)
		default:
			refused = append(refused, u.String())
		}
	}
	p.create = append(p.create, finishing...)
	if len(refused) > 0 {
		return retirePlan{}, &engine.Refusal{Reason: string(reason.PendingRejected), Message: fmt.Sprintf(
			"%s refuses the new password the source Secret holds for %s, so discarding the old one could lock its consumers out; nothing was discarded there. The discard began, so the rotation can only complete (abort and recover are refused): set each of these users there to the new password by hand (ALTER USER ... IDENTIFIED BY the value of its _PENDING key in the source Secret, then ALTER USER ... DISCARD OLD PASSWORD) and the discard finishes by itself",
			inst, strings.Join(refused, ", "))}
	}
	if other != nil {
		return retirePlan{}, other
	}
	return p, nil
}

// firstOf is first, or err when there is no first yet.
func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
