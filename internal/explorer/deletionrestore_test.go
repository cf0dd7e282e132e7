package explorer

import "testing"

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
