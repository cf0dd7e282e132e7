package explorer

import (
	"testing"
)

// An instance out of the spec (or away) while a rotation ran, the
// consumer's pod on the rotation's passwords, then the set's status and
// source Secret restored from a backup taken before it, and the instance
// listed again: the pod holds passwords only the distribution Secret
// still has, which the instance never accepted. rekey cannot give them to
// it (it never takes a secret from a distribution Secret), so noLockout
// excuses that refusal as the restore's doing (lostElsewhere); recover
// restarts the pod onto the current passwords. The seeded random walks
// found it (seed 1, 26 steps, 2026-11-30); this is its shortest form. The
// test fails unless a run reached such a refusal, and the rest of the
// invariants (an instance that accepted a lost password when it was
// dropped is still held to it: TestPathRecoverAfterRestore) hold.
func TestPathRestoreThenRelisted(t *testing.T) {
	reached := false
	o := Options{Instances: []string{"i0", "i1"}, SpecEdits: true, Backups: true,
		Only: []string{"user: rotate r1", "consumer", "user: removes i1", "user: adds i1", "status and source Secret restored", "user: recover c1"}}
	o.Observe = func(w *World) {
		in := w.instance("i1")
		if !listedIn(w.Set, in.Name) || in.Returned {
			return
		}
		for k, pw := range podHolds(w) {
			if !in.acct(k).Accepts(pw) && lostElsewhere(w, in, pw) {
				reached = true
			}
		}
	}
	explorePath(t, o, restoreRelistedDepth)
	if !reached {
		t.Error("never reached: i1, listed again after the restore, refusing a password the restore dropped and the pod holds")
	}
}

// restoreRelistedDepth: i1 removed, rotate, reconcile, the pod restarts,
// the restore, i1 listed again, reconcile.
const restoreRelistedDepth = 7
