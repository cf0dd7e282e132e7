package explorer

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// The primary is switched over (MOCO's steps: the primary made
// super_read_only, the candidate promoted, the others re-pointed, the
// last two in either order) at every step of a rotation, its discard,
// its rollback and a recovery, with crashes: no rotation starts and no
// discard begins while the switchover is under way (the health gate
// holds them, ClusterUnhealthy, and they start by themselves once the
// roles settle), and no consumer is locked out across it.
func TestPathSwitchover(t *testing.T) {
	reached := map[string]bool{}
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Switchover: true, Crashes: true, Observe: observeSwitchover(reached),
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "consumer", "switchover"}}, switchoverDepth)
	for _, want := range []string{"a rotation held by a switchover", "a discard held by a switchover", "a rotation Distributed across a switchover", "a switchover settled mid-rotation"} {
		if !reached[want] {
			t.Errorf("never reached %s: %v", want, reached)
		}
	}
}

// switchoverDepth: a switchover's three steps among a rotation's
// (rotate, reconcile, consumer restarts, discard, reconcile).
const switchoverDepth = 7

// observeSwitchover notes what a run reached.
func observeSwitchover(reached map[string]bool) func(*World) {
	return func(w *World) {
		st := w.Set.Status
		held := false
		for _, m := range w.Warnings {
			held = held || w.Switch != "" && strings.HasPrefix(m, string(reason.ClusterUnhealthy)+":")
		}
		switch {
		case held && strings.Contains(first(w.Warnings), "the rotation does not start"):
			reached["a rotation held by a switchover"] = true
		case held && strings.Contains(first(w.Warnings), "the discard"):
			reached["a discard held by a switchover"] = true
		}
		moved := w.Instances[0].RO
		if moved && st.Phase == v1.PhaseDistributed {
			reached["a rotation Distributed across a switchover"] = true
		}
		if moved && w.Switch == "" && engine.Active(st) {
			reached["a switchover settled mid-rotation"] = true
		}
	}
}
