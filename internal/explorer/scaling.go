package explorer

// The instances' comings and goings (Options.Scaling).

// scaleIn: the instance leaves the cluster with its volume.
func scaleIn(name string) func(*World) bool {
	return func(w *World) bool {
		in := w.instance(name)
		if in == nil || !in.Present || len(w.present()) < 2 {
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
		in.Present = true
		return true
	}
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
		in.Present = true
		in.Users = map[string]Account{AdminKey: {Exists: true, Primary: string(w.Dist.Data[AdminKey])}}
		return true
	}
}
