package mysql

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// RepairIdle (engine.IdleRepairer) is the upkeep of a set at rest. An
// instance that left the cluster with its volume and returned (a
// StatefulSet scaled in, then out) holds what it held then: a generation
// since retired, which refuses the consumers, or both passwords of a
// rotation whose discard it missed, the old one still valid; one rebuilt
// from an empty data directory lacks the users. Nothing else reaches it
// while the set is Idle, so the controller calls this on every reconcile
// of an Idle set: an instance that returns wakes the set (its StatefulSet
// changes) and is repaired by that reconcile, or within one of its
// answering.
//
// Quiet when nothing is wrong: one read-only session per instance reading
// mysql.user, no login tried, nothing written. Only an instance with
// something to repair gets a session that writes, after the set's fence.
// What mysql.user says of a user is decided by decideIdle; a second
// password rekey's marks do not account for is reported
// (DualPasswordExists), never overwritten.
func (b *Backend) RepairIdle(ctx context.Context, cur engine.Secrets) error {
	passwords := b.adminPasswords(cur, nil)
	var (
		mu      sync.Mutex
		foreign []string
	)
	err := b.forEachInstance(ctx, "upkeep/instance-checked", false, passwords, cur, func(s *session) error {
		accts, err := s.accounts(ctx, b.Users)
		if err != nil {
			return err
		}
		create, reset, dual := planIdle(b.Users, accts, s.gen)
		mu.Lock()
		for _, u := range dual {
			foreign = append(foreign, u.String()+" on "+s.inst.Name)
		}
		mu.Unlock()
		if len(create)+len(reset) == 0 {
			return nil
		}
		if b.Fence != nil {
			if err := b.Fence(ctx); err != nil {
				return &fencedError{err}
			}
		}
		w, err := openSession(ctx, "upkeep", true, b.fencing(), s.inst, b.transport, b.AdminUser, passwords...)
		if err != nil {
			return b.adminLoginError(err)
		}
		b.bind(w, cur)
		// Decided again in the session that writes.
		if accts, err = w.ensureUsers(ctx, b.Users, cur); err == nil {
			_, err = w.resetStale(ctx, b.Users, accts, cur)
		}
		if cerr := w.close(ctx); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(foreign) > 0 {
		sort.Strings(foreign)
		return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: fmt.Sprintf(
			"%s has a secondary password that rekey did not leave there (a change by hand, or a status restored from an older backup), so both stay valid and the next rotation will not start; rekey changed nothing. Reset it to the source Secret's current password with ALTER USER ... IDENTIFIED BY then ALTER USER ... DISCARD OLD PASSWORD (kubectl rekey recover does this)",
			strings.Join(foreign, ", "))}
	}
	return nil
}

// idleStep is what the Idle upkeep does with one user on one instance.
type idleStep int

const (
	idleNone idleStep = iota
	// idleCreate: missing (an instance rebuilt empty), or a creation a
	// crash interrupted: created accepting cur, as Provision does.
	idleCreate
	// idleReset: rekey's mark says it missed what the set did since
	// (generation.go): IDENTIFIED BY cur, DISCARD OLD PASSWORD. Every
	// consumer holds cur.
	idleReset
	// idleForeign: a second password rekey's mark does not account for:
	// a person's (or a restore's), reported and left as it is.
	idleForeign
)

// decideIdle decides one user from its row alone, for a set whose current
// generation is gen: no login, so that an Idle set costs one query per
// instance.
func decideIdle(a account, gen int64) idleStep {
	switch {
	case !a.exists || a.creating:
		return idleCreate
	case a.swapping:
		// Half a Distributed repair on an instance that left before the
		// rotation ended: its passwords are the rotation's, which rekey
		// cannot place; reported (recover's reset clears it).
		return idleForeign
	case staleMark(a.mark, gen):
		return idleReset
	case a.dual:
		return idleForeign
	}
	return idleNone
}

// planIdle sorts users by decideIdle.
func planIdle(users []User, accts map[string]account, gen int64) (create, reset, dual []User) {
	for _, u := range users {
		switch decideIdle(of(accts, u), gen) {
		case idleCreate:
			create = append(create, u)
		case idleReset:
			reset = append(reset, u)
		case idleForeign:
			dual = append(dual, u)
		}
	}
	return create, reset, dual
}
