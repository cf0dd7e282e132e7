package explorer

import "rekey.io/rekey/internal/engine"

// The instances' comings and goings (Options.Scaling).

// scaleIn: the instance leaves the cluster with its volume.
func scaleIn(name string) func(*World) bool {
	return func(w *World) bool {
		in := w.instance(name)
		// Not the primary, nor during a switchover: the cluster manager
		// switches over before it scales the primary in. Nor the last
		// instance the spec names (scaled to zero: a path of its own).
		if in == nil || !in.Present || len(w.held()) < 2 && listedIn(w.Set, name) || !in.RO || w.Switch != "" {
			return false
		}
		in.Present = false
		return true
	}
}

// returns: the instance comes back with the volume it left with.
func returns(name string) func(*World) bool {
	return func(w *World) bool {
		in := w.instance(name)
		if in == nil || in.Present {
			return false
		}
		w.cameBack(in)
		in.Stranded = w.Source != nil && !w.FixedAdmin && !adminHeld(w, in.acct(AdminKey))
		return true
	}
}

// adminHeld: a accepts an admin password the source Secret holds.
func adminHeld(w *World, a Account) bool {
	return a.Accepts(string(w.Source.Data[AdminKey])) || a.Accepts(string(w.Source.Data[engine.PendingKey(AdminKey)]))
}

// unstrand: a person sets the admin's password on a stranded instance to
// the source Secret's current one, as rekey's refusal says (the other
// users keep what they hold: rekey repairs them at its next reconcile).
func unstrand(w *World, in *Instance) {
	a := in.acct(AdminKey)
	a.identifiedBy(string(w.Source.Data[AdminKey]), false)
	a.discard()
	in.set(AdminKey, a)
	in.Stranded, in.Returned = false, true
}

// rebuilt: the instance comes back from an empty data directory; its
// bootstrap recreates the admin with what the distribution Secret holds
// (MOCO's does), and nothing else rekey made (sql_log_bin=0).
func rebuilt(name string) func(*World) bool {
	return func(w *World) bool {
		in := w.instance(name)
		if in == nil || in.Present || w.Dist == nil {
			return false
		}
		w.cameBack(in)
		admin := string(w.Dist.Data[AdminKey])
		if w.FixedAdmin {
			admin = fixedAdminPassword
		}
		in.Users = map[string]Account{AdminKey: {Exists: true, Primary: admin}}
		if w.Peer != nil {
			// Its bootstrap recreates the other set's admin account too.
			in.set(RootKey, Account{Exists: true, Primary: initial(RootKey)})
		}
		// The distribution Secret may hold an admin password the source
		// Secret no longer does (a restore from backup dropped it).
		in.Stranded = w.Source != nil && !w.FixedAdmin && !adminHeld(w, in.acct(AdminKey))
		return true
	}
}
