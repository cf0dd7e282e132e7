package mysql

import (
	"context"
	"fmt"

	"rekey.io/rekey/internal/engine"
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
		var create, finish, discard, retain []User
		for _, u := range b.Users {
			a := of(accts, u)
			switch {
			case !a.exists && u.loginCheckable() && !b.acceptedElsewhere(ctx, s.inst, u, pending[u.Key]):
				return &engine.Refusal{Reason: string(reason.DiscardRefused), Message: missingRefusal(s.inst, u)}
			case !a.exists:
				create = append(create, u)
				continue
			case a.creating:
				finish = append(finish, u)
			case a.swapping:
				// Half a RepairPending swap: cur is primary, pending the
				// secondary that DISCARD would drop. The swap's second
				// statement (the retain below) first.
				retain, discard = append(retain, u), append(discard, u)
				continue
			}
			if !u.loginCheckable() {
				if a.dual {
					discard = append(discard, u)
				}
				continue
			}
			pendingErr := b.verifyLogin(ctx, s.inst, u, pending[u.Key])
			if pendingErr != nil && !isLoginRefused(pendingErr) {
				return pendingErr
			}
			pendingOK := pendingErr == nil
			curErr := error(nil)
			if !pendingOK && !a.dual {
				if curErr = b.verifyLogin(ctx, s.inst, u, cur[u.Key]); curErr != nil && !isLoginRefused(curErr) {
					return curErr
				}
			}
			switch {
			case pendingOK && a.dual:
				discard = append(discard, u)
			case pendingOK:
				// discarded already
			case !a.dual && curErr == nil:
				retain, discard = append(retain, u), append(discard, u)
			default:
				return &engine.Refusal{Reason: string(reason.PendingRejected), Message: fmt.Sprintf(
					"%s refuses the new password the source Secret holds for %s, so discarding the old one could lock its consumers out; nothing was discarded there. The source Secret may have been edited: run kubectl rekey recover to roll back", s.inst.Name, u)}
			}
		}
		for _, u := range append(create, finish...) {
			if err := s.createUser(ctx, u, pending[u.Key]); err != nil {
				return err
			}
		}
		// Every retain before any discard: a user in both (half a swap,
		// or one that missed phase 1) must hold pending as its primary
		// before its secondary goes. If the retain fails, nothing is
		// discarded here.
		var retains, discards []alteration
		for _, u := range retain {
			retains = append(retains, alteration{u, "IDENTIFIED BY " + quote(pending[u.Key]) + " RETAIN CURRENT PASSWORD"})
		}
		for _, u := range discard {
			discards = append(discards, alteration{u, "DISCARD OLD PASSWORD"})
		}
		// ATTRIBUTE clears a swap's mark in the same statement.
		if err := s.alterAll(ctx, retains, "ATTRIBUTE "+createdAttribute); err != nil {
			return err
		}
		return s.alterAll(ctx, discards, "")
	})
}
