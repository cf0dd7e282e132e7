package explorer

import (
	"context"
	"sort"
	"strings"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// The generation marks and the Idle upkeep of the MySQL backend
// (internal/backend/mysql generation.go, upkeep.go) on the model.

// gen is the set's current generation as the MySQL backend is built with
// it (status.keyGeneration, or the one provisioning mints).
func (b *modelBackend) gen() int64 {
	if g := b.cs.Status.KeyGeneration; g > 0 {
		return g
	}
	return engine.InitialGeneration(b.cs.Spec.Rotation)
}

// target is the generation the set's rotation produces.
func (b *modelBackend) target() int64 {
	return engine.TargetGeneration(b.cs.Spec.Rotation, b.cs.Status)
}

// resetStale sets every stale user of in back to cur.
func (b *modelBackend) resetStale(in *Instance, cur engine.Secrets) {
	for _, k := range b.Keys() {
		if a := in.acct(k); a.stale(b.gen()) {
			a.resetToCur(cur[k], b.gen())
			in.set(k, a)
		}
	}
}

// RepairIdle is the MySQL backend's: on every instance, create a missing
// user accepting cur, set a stale one back to cur (after the fence), and
// report a second password the marks do not account for.
func (b *modelBackend) RepairIdle(ctx context.Context, cur engine.Secrets) error {
	var foreign []string
	err := b.each("model/upkeep", []string{cur[AdminKey]}, func(in *Instance) error {
		write := false
		for _, k := range b.Keys() {
			switch a := in.acct(k); {
			case !a.Exists, a.stale(b.gen()):
				write = true
			case a.Dual():
				foreign = append(foreign, k+" on "+in.Name)
			}
		}
		if !write {
			return nil
		}
		if b.fence != nil {
			if err := b.fence(ctx); err != nil {
				return err
			}
		}
		for _, k := range b.Keys() {
			if a := in.acct(k); !a.Exists {
				a.make(cur[k])
				a.mark(b.gen(), false)
				in.set(k, a)
			}
		}
		b.resetStale(in, cur)
		return nil
	})
	if err != nil {
		return err
	}
	if len(foreign) > 0 {
		sort.Strings(foreign)
		return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: strings.Join(foreign, ", ") +
			" has a secondary password that rekey did not leave there; rekey changed nothing. Reset it to the source Secret's current password (kubectl rekey recover does this)"}
	}
	return nil
}
