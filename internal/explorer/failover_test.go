package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// The primary fails over to the replica, a switchover is abandoned half
// way, and the replica is rebuilt by CLONE from the primary, at every step
// of a rotation, its discard and its rollback, with crashes: no consumer
// locked out, nothing lost, no rotation or discard started while a
// switchover is under way, no wedge. The health gate holds a phase while
// the failed primary does not answer; a clone brings the donor's users,
// with both passwords while Distributed.
func TestPathFailoverCloneAbandon(t *testing.T) {
	reached := map[string]bool{}
	o := Options{Instances: []string{"i0", "i1"}, Switchover: true, Scaling: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "consumer",
			"failover to i1", "i0 answers again", "switchover to i1 begins", "abandoned switchover", "i1 scaled in", "i1 returns rebuilt by CLONE"}}
	o.Observe = func(w *World) {
		st := w.Set.Status
		i0, i1 := w.instance("i0"), w.instance("i1")
		if !i1.RO && i0.RO && i0.From == "i1" && !i0.Down && st.Phase == v1.PhaseDistributed {
			reached["a rotation Distributed across a failover, the old primary back as a replica"] = true
		}
		if !i1.RO && st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle {
			reached["a rotation completed after a failover"] = true
		}
		if w.Switch == "" && !i0.RO && i1.RO && i1.From == "i0" && engine.Active(st) && w.Abandoned {
			reached["a switchover abandoned mid-rotation"] = true
		}
		if i1.Present && i1.Returned && st.Phase == v1.PhaseDistributed && i1.acct(AppKey).Accepts("APP-r1") && i1.acct(AppKey).Accepts("APP-0") {
			reached["i1 cloned while Distributed, with both passwords"] = true
		}
	}
	explorePath(t, o, failoverDepth)
	for _, want := range []string{"a rotation Distributed across a failover, the old primary back as a replica", "a rotation completed after a failover",
		"a switchover abandoned mid-rotation", "i1 cloned while Distributed, with both passwords"} {
		if !reached[want] {
			t.Errorf("never reached: %s", want)
		}
	}
}

// failoverDepth: rotate, reconcile, a failover and the old primary's
// return, a consumer restart, a discard and its reconcile.
var failoverDepth = envInt("REKEY_EXPLORE_FAILOVER_DEPTH", 7)

// A failover of a cluster of three (a primary and two replicas): the
// primary fails and i1 is promoted while i2 still replicates from the
// failed primary until the cluster manager re-points it, at every step of
// a rotation and its discard, with crashes. No rotation or discard starts
// until i2 replicates from the new primary, no consumer is locked out,
// nothing is lost, no wedge.
func TestPathFailoverThreeInstances(t *testing.T) {
	reached := map[string]bool{}
	o := Options{Instances: []string{"i0", "i1", "i2"}, Switchover: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "consumer",
			"failover to i1, the others", "switchover to i1: the others re-pointed", "i0 answers again"}}
	o.Observe = func(w *World) {
		st := w.Set.Status
		i0, i1, i2 := w.instance("i0"), w.instance("i1"), w.instance("i2")
		if !i1.RO && i0.Down && i2.From == "i0" && engine.Active(st) {
			reached["i2 replicating from the failed primary mid-rotation"] = true
		}
		if !i1.RO && i2.From == "i1" && i0.From == "i1" && !i0.Down && st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle {
			reached["a rotation completed after the failover, the old primary back as a replica"] = true
		}
	}
	explorePath(t, o, envInt("REKEY_EXPLORE_FAILOVER3_DEPTH", 8))
	for _, want := range []string{"i2 replicating from the failed primary mid-rotation", "a rotation completed after the failover, the old primary back as a replica"} {
		if !reached[want] {
			t.Errorf("never reached: %s", want)
		}
	}
}
