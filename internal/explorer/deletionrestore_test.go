package explorer

import (
	"strings"
	"testing"
)

// A set deleted while Distributed has its status and source Secret
// restored from a backup taken while Idle: it looks Idle, yet every
// instance accepts the rotation's password and the previous one as its
// secondary, and its consumer may hold either. The wind-down must not
// leave both valid (nothing left valid after deletion) nor keep one the
// consumer holds from it: it holds, names recover, and recover must be
// accepted (no dead end) and bring the set to gone (no wedge).
func TestPathRestoreThenDelete(t *testing.T) {
	explorePath(t, Options{Instances: []string{"i0"}, Deletion: true, Backups: true,
		Only: []string{"user: rotate r1", "user: delete", "status", "consumer"}}, 6)
}

// The same with a switchover under way: the backend's precheck refuses
// for the health gate (ClusterUnhealthy) before it looks for a second
// password, and the wind-down went ahead blind, leaving both passwords
// valid (nothing left valid after deletion, 6 steps: rotate r1,
// reconcile, delete, switchover begins, restore, reconcile; found by the
// random walks, seed 1, 32 steps, 2026-11-30). Now the deleted set waits
// for the roles to settle, then holds for the second password as above.
// The test fails unless a deleted set was held by a switchover.
func TestPathRestoreThenDeleteDuringSwitchover(t *testing.T) {
	held := false
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Deletion: true, Backups: true, Switchover: true,
		Observe: func(w *World) {
			held = held || w.deleted() && !w.Gone && w.Switch != "" && strings.HasPrefix(first(w.Warnings), "ClusterUnhealthy: the set is deleted")
		},
		Only: []string{"user: rotate r1", "consumer", "status and source Secret restored", "user: delete the set", "switchover to i1 begins", "abandoned switchover", "user: recover c1"}}, 7)
	if !held {
		t.Error("never reached: a deleted set held by a switchover under way")
	}
}
