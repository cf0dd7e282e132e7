package explorer

import (
	"context"

	"rekey.io/rekey/internal/engine"
)

// Release is deletion.go's Release (deletionPolicy Discard): it logs in
// as the admin on every instance and removes rekey's marks; passwords are
// left alone. With no admin password (the wind-down emptied the source
// Secret before a crash, or nothing was provisioned) there is nothing it
// can or need do.
func (b *modelBackend) Release(_ context.Context, cur engine.Secrets) error {
	return b.deleteOwned("model/released", cur, nil)
}

// Deprovision is deletion.go's Deprovision (deletionPolicy Delete): the
// users rekey created for the set (marked wherever they exist; never the
// admin it connects as) are dropped on every instance, the others
// released. Every instance is read before any is changed, so one that
// does not answer changes nothing.
func (b *modelBackend) Deprovision(_ context.Context, cur engine.Secrets) error {
	drop := map[string]bool{}
	for _, k := range b.Keys() {
		exists, mine := false, true
		for _, in := range b.insts() {
			if a := in.acct(k); a.Exists {
				exists, mine = true, mine && a.Marked
			}
		}
		drop[k] = exists && mine && k != AdminKey
	}
	return b.deleteOwned("model/deprovisioned", cur, drop)
}

func (b *modelBackend) deleteOwned(step string, cur engine.Secrets, drop map[string]bool) error {
	if cur[AdminKey] == "" && !b.w.FixedAdmin {
		return nil
	}
	for _, in := range b.insts() {
		if in.Down {
			return &engine.UnreachableError{Instance: in.Name, Err: errDown}
		}
		if err := b.admin(in, []string{cur[AdminKey]}); err != nil {
			return err
		}
	}
	return b.each(step, []string{cur[AdminKey]}, func(in *Instance) error {
		for _, k := range b.Keys() {
			a := in.acct(k)
			switch {
			case !a.Marked:
			case drop[k]:
				delete(in.Users, k)
			default:
				a.Marked = false
				in.set(k, a)
			}
		}
		return nil
	})
}
