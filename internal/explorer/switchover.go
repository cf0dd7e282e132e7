package explorer

import (
	"fmt"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Roles and switchovers (Options.Switchover). The first instance starts
// as the primary (writable), the others replicate from it, read-only. A
// switchover, MOCO's or a DBA's, takes three steps, the last two in
// either order: the primary is made super_read_only (the replicas still
// replicate from it); the candidate stops replicating (STOP REPLICA,
// RESET REPLICA, which keeps its channel, stopped) and is made writable;
// the others are re-pointed to it. Credential statements run with
// sql_log_bin=0 (accounts.go), so a switchover moves no user: each
// instance keeps what rekey applied to it in whatever role it had.

// healthGate is the MySQL backend's health decision (decideHealth,
// through mysql.DecideHealth) on the given instances' roles: nil when the
// rotation (discard false) or the discard may start. The package's tests
// wire it (gate_test.go): only internal/backend and tests import a
// backend package (internal/backend/all TestOnlyAllNamesBackends), and
// the explorer runs only as tests.
var healthGate = func(discard bool, ins []*Instance) error {
	panic("explorer: healthGate is wired by the package's tests (gate_test.go)")
}

// health is the health gate on the present instances. The caller has
// logged in on every instance first, as the real gate's observations do.
func (b *modelBackend) health(discard bool) error {
	return healthGate(discard, b.insts())
}

// duringSwitch notes what rekey did while a switchover was under way
// that the health gate is there to hold (checked by noStartDuringSwitch).
func (b *modelBackend) duringSwitch(what string) {
	if b.w.Switch != "" {
		b.w.Unsafe = append(b.w.Unsafe, what)
	}
}

// noteStarts notes a rotation recorded, or a discard recorded as begun,
// by a reconcile while a switchover was under way (before: the status it
// started from; the roles do not change during a reconcile).
func noteStarts(w *World, before v1.CredentialSetStatus) {
	if w.Switch == "" {
		return
	}
	st := w.Set.Status
	if st.RotationID != "" && st.RotationID != before.RotationID {
		w.Unsafe = append(w.Unsafe, "rotation "+st.RotationID+" started")
	}
	if st.DiscardStarted && !before.DiscardStarted {
		w.Unsafe = append(w.Unsafe, "the discard of rotation "+st.RotationID+" began")
	}
}

// noStartDuringSwitch: no rotation starts and no discard begins or drops
// a password while a switchover is under way (the primary made
// super_read_only, not yet replaced): rekey would lift super_read_only on
// the instance being demoted. The phase starts once the roles settle.
func noStartDuringSwitch(w *World) string {
	if len(w.Unsafe) == 0 || len(w.held()) < len(w.present()) {
		// With an instance its spec does not name, rekey sees a cluster
		// of the others alone, and the switchover is the user's to wait
		// out (docs/explorer.md, "Spec edits").
		return ""
	}
	return fmt.Sprintf("during the switchover to %s: %s", w.Switch, strings.Join(w.Unsafe, "; "))
}

// primaryOf is the writable present instance, if exactly one.
func primaryOf(w *World) *Instance {
	var out *Instance
	for _, in := range w.present() {
		if !in.RO {
			if out != nil {
				return nil
			}
			out = in
		}
	}
	return out
}

// beginSwitchover: the primary is made super_read_only, to hand over to
// name, a replica of it that answers.
func beginSwitchover(name string) func(*World) bool {
	return func(w *World) bool {
		p, to := primaryOf(w), w.instance(name)
		if w.Switch != "" || w.Gone || p == nil || to == nil || to == p || !to.Present || to.Down || to.From != p.Name {
			return false
		}
		p.RO, w.Switch = true, name
		return true
	}
}

// promote: the candidate stops replicating (its channel stays, stopped)
// and is made writable.
func promote(name string) func(*World) bool {
	return func(w *World) bool {
		to := w.instance(name)
		if w.Switch != name || !to.RO || to.Down {
			return false
		}
		to.RO, to.Stopped = false, to.From != ""
		settle(w)
		return true
	}
}

// repoint: every other instance replicates from the candidate.
func repoint(name string) func(*World) bool {
	return func(w *World) bool {
		if w.Switch != name {
			return false
		}
		changed := false
		for _, in := range w.Instances {
			if in.Name != name && (in.From != name || in.Stopped || !in.RO) {
				in.From, in.Stopped, in.RO, changed = name, false, true, true
			}
		}
		settle(w)
		return changed
	}
}

// settle ends the switchover once the candidate is writable and every
// other instance replicates from it.
func settle(w *World) {
	to := w.instance(w.Switch)
	if to == nil || to.RO {
		return
	}
	for _, in := range w.Instances {
		if in != to && (in.From != to.Name || in.Stopped) {
			return
		}
	}
	w.Switch = ""
}

// finishSwitch is the cluster manager finishing a switchover under way,
// one step at a time, what a ClusterUnhealthy refusal waits for.
func finishSwitch(w *World) string {
	if w.Switch == "" {
		return ""
	}
	name := w.Switch
	if promote(name)(w) {
		return "the cluster manager promotes " + name
	}
	repoint(name)(w)
	return "the cluster manager re-points the others to " + name
}

func switchoverTransitions(o Options) []Transition {
	var out []Transition
	for _, name := range o.Instances {
		out = append(out,
			Transition{"switchover to " + name + " begins: the primary made super_read_only", beginSwitchover(name)},
			Transition{"switchover to " + name + ": " + name + " promoted (STOP REPLICA, RESET REPLICA, writable)", promote(name)},
			Transition{"switchover to " + name + ": the others re-pointed to it", repoint(name)},
			Transition{"failover to " + name + ": the primary fails, " + name + " promoted, the others re-pointed", failover(name)})
		if len(o.Instances) > 2 {
			out = append(out, Transition{"failover to " + name + ", the others re-pointed a step later: the primary fails, " + name + " promoted", failoverStaged(name)})
		}
	}
	out = append(out, Transition{"abandoned switchover: the primary made writable again before the candidate was promoted", abandonSwitch})
	for _, name := range o.Instances {
		out = append(out, Transition{name + " answers again (a replica, after its failover)", failedBack(name)})
	}
	return out
}

// roleNote is in's role for traces, once the roles left their start.
func roleNote(w *World, in *Instance) string {
	if w.Switch == "" && (len(w.Instances) == 0 || !w.Instances[0].RO) {
		return ""
	}
	switch {
	case !in.RO && in.From != "":
		return " primary(" + in.From + " channel stopped)"
	case !in.RO:
		return " primary"
	case in.From == "":
		return " read-only, replicates from nothing"
	}
	return " from " + in.From
}
