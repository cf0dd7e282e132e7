package explorer

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"strings"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// RepairPending is pending_repair.go's: keys without a pending secret
// (a user listed again left only its own) get RepairIdle, the others
// decideRepair on each user.
func (b *modelBackend) RepairPending(ctx context.Context, cur, pending engine.Secrets) error {
	if has, lacks := engine.SplitByPending(b.Keys(), pending); len(has) > 0 && len(lacks) > 0 {
		return cmp.Or(b.leaving(lacks).RepairPending(ctx, cur, pending), b.leaving(has).RepairIdle(ctx, cur))
	}
	var unknown []string
	err := b.each("model/repaired", []string{pending[AdminKey], cur[AdminKey]}, func(in *Instance) error {
		if b.fence != nil && repairNeeded(in, cur, pending, b.gen()) {
			// As the MySQL backend, before the session that repairs.
			if err := b.fence(ctx); err != nil {
				return err
			}
		}
		for _, k := range b.Keys() {
			a := in.acct(k)
			switch {
			case !a.Exists:
				a.make(cur[k])
				a.identifiedBy(pending[k], true)
			case a.stale(b.gen()) && !bothAccepted(a, cur[k], pending[k]):
				a.resetToCur(cur[k], b.gen())
				a.identifiedBy(pending[k], true)
			case a.Dual():
				continue
			case a.Accepts(cur[k]):
				a.identifiedBy(pending[k], true)
			case a.Accepts(pending[k]):
				a.identifiedBy(cur[k], true)
				a.identifiedBy(pending[k], true)
			default:
				unknown = append(unknown, k+" on "+in.Name)
				continue
			}
			a.mark(b.target(), true)
			in.set(k, a)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return &engine.Refusal{Reason: string(reason.PendingRejected), Message: strings.Join(unknown, ", ") +
			" accepts neither the current nor the new password; if the user was changed by hand there, set it back to the current password (ALTER USER ... IDENTIFIED BY, then ALTER USER ... DISCARD OLD PASSWORD) and rekey adds the new one by itself; if the source Secret was edited, run kubectl rekey recover"}
	}
	return nil
}

// repairNeeded: RepairPending would change a user on in.
func repairNeeded(in *Instance, cur, pending engine.Secrets, gen int64) bool {
	for k := range cur {
		if a := in.acct(k); !a.Exists || a.stale(gen) && !bothAccepted(a, cur[k], pending[k]) || (!a.Dual() && (a.Accepts(cur[k]) || a.Accepts(pending[k]))) {
			return true
		}
	}
	return false
}

// bothAccepted: a accepts cur and pending already, which is what a repair
// makes of it; a stale mark then records a discard that went on without
// it (a user listed again), not a rotation it missed.
func bothAccepted(a Account, cur, pending string) bool { return a.Accepts(cur) && a.Accepts(pending) }

// leaving is b without keys (any, the admin's too: for a repair split
// by key, not for a rotation).
func (b *modelBackend) leaving(keys []string) *modelBackend {
	c := *b
	c.without = append(slices.Clone(b.without), keys...)
	return &c
}
