package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// An instance leaves the cluster with its volume at every step of a
// rotation and its discard, and returns with what it held then, or
// rebuilt empty: from the set's next reconcile after its return, it
// accepts what the consumers hold and nothing the rotation retired (no
// lockout, nothing lost). The admin rekey connects as is not rotated
// (a plain StatefulSet's root), so rekey can always log in.
func TestPathScaling(t *testing.T) {
	reached := map[string]bool{}
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Scaling: true, FixedAdmin: true, Observe: observeReturns(reached),
		Only: []string{"user: rotate r1", "user: discard (active", "consumer", "i1"}}, 7)
	for _, want := range []string{"an older generation", "the two passwords of a completed rotation", "its users missing (rebuilt)"} {
		if !reached[want] {
			t.Errorf("no instance returned with %s: %v", want, reached)
		}
	}
}

// The same with the admin rotated by the set (MOCO's preset): an instance
// away while a rotation completed returns with an admin password rekey no
// longer holds, so rekey cannot log in there (Stranded: the refusal names
// the instance and says to set the admin's password there); every other
// return is repaired as above.
func TestPathScalingRotatedAdmin(t *testing.T) {
	reached := map[string]bool{}
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Scaling: true, Crashes: true, Observe: observeReturns(reached),
		Only: []string{"user: rotate r1", "user: discard (active", "consumer", "i1"}}, 7)
	for _, want := range []string{"the two passwords of a completed rotation", "its users missing (rebuilt)", "an admin password rekey no longer holds"} {
		if !reached[want] {
			t.Errorf("no instance returned with %s: %v", want, reached)
		}
	}
}

// observeReturns notes what the instances that returned held.
func observeReturns(reached map[string]bool) func(*World) {
	return func(w *World) {
		g := w.Set.Status.KeyGeneration
		for _, in := range w.Instances {
			if !in.Present || !in.Returned {
				continue
			}
			a := in.acct(AppKey)
			switch {
			case in.Stranded:
				reached["an admin password rekey no longer holds"] = true
			case !a.Exists:
				reached["its users missing (rebuilt)"] = true
			case a.Gen > 0 && a.Gen < g && !a.DualMark:
				reached["an older generation"] = true
			case a.Dual() && a.Gen == g && a.DualMark:
				reached["the two passwords of a completed rotation"] = true
			}
		}
	}
}

// An instance returns rebuilt empty while a reset is owed: a recovery's
// (kubectl rekey recover on an Idle set: no pending secrets) or a
// rollback's (the source Secret still holds the rotation's). From the
// set's next reconcile it accepts what the consumers hold, and the reset
// still completes.
func TestPathScalingDuringReset(t *testing.T) {
	reached := map[string]bool{}
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Scaling: true, Crashes: true, Observe: observeResets(reached),
		Only: []string{"user: rotate r1", "user: abort (active", "user: recover c1", "consumer", "i1 scaled in", "i1 returns rebuilt"}}, 6)
	for _, want := range []string{"a recovery's", "a rollback's"} {
		if !reached[want] {
			t.Errorf("no instance returned rebuilt during %s reset: %v", want, reached)
		}
	}
}

// observeResets notes the resets an instance returned rebuilt during.
func observeResets(reached map[string]bool) func(*World) {
	return func(w *World) {
		st := w.Set.Status
		if !st.ResetPending || w.Source == nil {
			return
		}
		for _, in := range w.Instances {
			if in.Present && in.Returned && !in.acct(AppKey).Exists {
				if st.LastRolledBackID != "" && len(w.Source.Data) > len(w.keys()) {
					reached["a rollback's"] = true
				} else {
					reached["a recovery's"] = true
				}
			}
		}
	}
}

// A deleted set (deletionPolicy Discard) winds down while an instance
// returns rebuilt empty: the current credentials stay valid for the
// consumers that hold them on every instance, that one included.
func TestPathScalingDeletion(t *testing.T) {
	reached := false
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Scaling: true, Crashes: true, Deletion: true,
		Observe: func(w *World) {
			in := w.instance("i1")
			reached = reached || w.deleted() && !w.Gone && in.Present && in.Returned && !in.acct(AppKey).Exists
		},
		Only: []string{"user: rotate r1", "user: delete the set", "consumer", "i1 scaled in", "i1 returns"}}, 5)
	if !reached {
		t.Error("no instance returned rebuilt while a deleted set waited to wind down")
	}
}

// A set deleted with deletionPolicy Delete waits for its consumer to go
// (UsersInUse) while an instance returns rebuilt empty, or with its old
// volume: the consumer still logs in with the current credentials, so the
// wait repairs that instance as an Idle set's reconcile would. It used to
// repair nothing until the consumer was gone (no lockout, 4 steps: delete,
// i1 scaled in, returns rebuilt, reconcile; found by the random walks,
// seed 3, 2026-11-30). The test fails unless a rebuilt instance was
// repaired while the deleted set waited.
func TestPathScalingDeletePolicy(t *testing.T) {
	repaired := false
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Scaling: true, Crashes: true, Deletion: true, Policy: v1.DeletionDelete,
		Observe: func(w *World) {
			in := w.instance("i1")
			waiting := w.deleted() && !w.Gone && w.Source != nil && w.Web != nil
			repaired = repaired || waiting && in.Present && !in.Returned && in.acct(AppKey).Exists && !in.acct(AppKey).Hand &&
				in.acct(AppKey).Accepts(string(w.Source.Data[AppKey])) && in.acct(AppKey).Gen == w.Set.Status.KeyGeneration && in.acct(AppKey).Marked
		},
		Only: []string{"user: delete the set", "consumer", "i1 scaled in", "i1 returns", "user: delete the consumer"}}, 6)
	if !repaired {
		t.Error("no instance returned rebuilt and was repaired while a deleted set waited for its consumer")
	}
}

// A deleted set held by a switchover under way (ClusterUnhealthy, as a
// rotation is held) while its consumer still runs, and an instance returns
// rebuilt empty: the consumer still logs in with the current credentials,
// so the hold repairs that instance as the wait for consumers does. It
// used to repair nothing until the roles settled (no lockout, 5 steps:
// delete, i1 scaled in, returns rebuilt, switchover to i1 begins,
// reconcile; found by the two-set world's random walks, seed 4,
// 2026-11-30, for the second set). Both policies that wind down hold so.
// The test fails unless a rebuilt instance was repaired during a hold.
func TestPathDeletionHeldRepairs(t *testing.T) {
	for _, policy := range []v1.DeletionPolicy{v1.DeletionDelete, v1.DeletionDiscard} {
		t.Run(string(policy), func(t *testing.T) {
			repaired := false
			explorePath(t, Options{Instances: []string{"i0", "i1"}, Scaling: true, Switchover: true, Crashes: true, Deletion: true, Policy: policy,
				Observe: func(w *World) {
					in := w.instance("i1")
					held := w.deleted() && !w.Gone && w.Switch != "" && w.Source != nil && len(w.Source.Data) > 0
					repaired = repaired || held && in.Present && !in.Returned && in.acct(AppKey).Accepts(string(w.Source.Data[AppKey])) && in.acct(AppKey).Marked
				},
				Only: []string{"user: delete the set", "consumer", "i1 scaled in", "i1 returns rebuilt empty", "switchover to i1 begins"}}, 6)
			if !repaired {
				t.Error("no instance returned rebuilt and was repaired while a switchover held the deleted set")
			}
		})
	}
}
