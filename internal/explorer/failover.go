package explorer

import "maps"

// Role changes besides a switchover (Options.Switchover): a failover, and
// a switchover the cluster manager abandons half way; and an instance
// rebuilt by CLONE (Options.Scaling). Like a switchover, none moves a
// user: credential statements run with sql_log_bin=0 (accounts.go).

// failover: the primary fails (stops answering) and name, a replica of it
// that answers, is promoted (its channel stays, stopped, as after RESET
// REPLICA); the others are re-pointed to it. The failed primary comes back
// as a replica of name (MOCO restarts it so), with the users it held:
// "answers again" (outage) brings it back.
func failover(name string) func(*World) bool {
	return func(w *World) bool {
		p, to := primaryOf(w), w.instance(name)
		if !canFailOver(w, p, to) {
			return false
		}
		p.Down = true
		to.RO, to.Stopped = false, true
		for _, in := range w.Instances {
			if in != to {
				in.From, in.Stopped, in.RO = name, false, true
			}
		}
		return true
	}
}

// canFailOver: the primary p answers and to, a replica of it that
// answers, can take over.
func canFailOver(w *World, p, to *Instance) bool {
	return w.Switch == "" && !w.Gone && p != nil && !p.Down && to != nil && to != p && to.Present && !to.Down && to.From == p.Name
}

// failoverStaged is a failover of a cluster of more than one replica, as
// the cluster manager carries it out: the primary fails and name is
// promoted; the other replicas go on replicating from the failed primary
// until the manager re-points them, a step later (the switchover's
// "re-pointed" step, or the drain's finishSwitch). Until then the roles
// are a switchover under way (w.Switch): no rotation or discard may start.
func failoverStaged(name string) func(*World) bool {
	return func(w *World) bool {
		p, to := primaryOf(w), w.instance(name)
		if len(w.Instances) < 3 || !canFailOver(w, p, to) {
			return false
		}
		p.Down = true
		to.RO, to.Stopped = false, true
		w.Switch = name
		return true
	}
}

// abandonSwitch: the cluster manager gives up a switchover before it
// promoted the candidate or re-pointed anyone to it (it did not catch up
// in time), and makes the old primary writable again: the roles are as
// before it began.
func abandonSwitch(w *World) bool {
	to := w.instance(w.Switch)
	if to == nil || !to.RO {
		return false
	}
	for _, in := range w.Instances {
		if in != to && in.From == to.Name {
			return false
		}
	}
	for _, in := range w.Instances {
		if in.Present && in.RO && in.From == "" {
			in.RO = false
		}
	}
	w.Switch, w.Abandoned = "", true
	return true
}

// cloned: the instance comes back rebuilt by CLONE INSTANCE FROM the
// primary, as MOCO rebuilds a replica: it holds the donor's mysql.user
// rows, secondary passwords and rekey's marks included
// (testenv.ReinitOptions.Clone; test/e2e TestReinitReplicaMidRotation
// and TestScaleUpMidRotation on real servers), and replicates from it.
func cloned(name string) func(*World) bool {
	return func(w *World) bool {
		in, donor := w.instance(name), primaryOf(w)
		if in == nil || in.Present || donor == nil || donor.Down || w.Switch != "" {
			return false
		}
		w.cameBack(in)
		in.Users = maps.Clone(donor.Users)
		in.RO, in.From, in.Stopped = true, donor.Name, false
		in.Stranded = w.Source != nil && !w.FixedAdmin && !adminHeld(w, in.acct(AdminKey))
		return true
	}
}

// failedBack: the primary that failed over answers again, a replica of
// the new primary now (an instance merely stopped comes back by outage).
func failedBack(name string) func(*World) bool {
	return func(w *World) bool {
		in := w.instance(name)
		if in == nil || !in.Present || !in.Down || w.Gone || in.From == "" || primaryOf(w) == nil {
			return false
		}
		in.Down = false
		return true
	}
}
