package explorer

import (
	"maps"
	"slices"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// cephHas: the monitor has generation g's entity.
func cephHas(w *World, g int64) bool { return w.instance(cephMon).acct(cephEntity(g)).Exists }

// cephServes: the set is at rest on generation g (the source Secret's
// key), not deleted.
func cephServes(w *World, g int64) bool {
	st := w.Set.Status
	return w.Set.DeletionTimestamp == nil && st.Phase == v1.PhaseIdle && st.RotationID == "" && !st.ResetPending &&
		cephEntityOf(string(w.Source.Data[cephBase])) == cephEntity(g)
}

func priorCount(w *World) int {
	if p := w.Set.Status.PriorKeyCount; p != nil {
		return int(*p)
	}
	return -1
}

// The Ceph world with keepPriorKeyCount 1 (cephpriors.go): a rotation, its
// discard and rollback, recover, a restore, the monitor's outage, the
// count lowered and deletion with each policy, with crashes. Every
// invariant holds; the test fails unless a rotation completed with the
// prior generation kept (status.priorKeyCount 1), one was rolled back, and
// the set was wound down.
func TestCephPriors(t *testing.T) {
	explorePolicies(t, Options{Ceph: true, KeepPriors: 1, Crashes: true, Backups: true, Deletion: true,
		Only: append(backendOnly("mon"), "user: lower keepPriorKeyCount")},
		envInt("REKEY_EXPLORE_CEPH_PRIORS_DEPTH", 5), map[string]func(*World) bool{
			"prior kept": func(w *World) bool {
				return w.Set.Status.LastRotationID == "r1" && cephServes(w, 2) && cephHas(w, 1) && priorCount(w) == 1
			},
			"rolled back": func(w *World) bool {
				st := w.Set.Status
				return st.LastRolledBackID == "r1" && !st.ResetPending && !cephHas(w, 2)
			},
			"wound down": woundDown,
		})
}

// cephKeptPath is r1 completed with keepPriorKeyCount 1: generation 2
// current, generation 1 kept.
var cephKeptPath = []string{"user: rotate r1", "reconcile", "consumer pod restarts (reads the Secret)", "user: discard (active ID)", "reconcile"}

// From r1 completed with a prior kept: the next rotation, r2, its discard
// (which trims generation 1 and keeps 2) and rollback (which keeps both),
// the count lowered at rest (trimmed where the backend is built, or by
// the discard), the pod's restarts and deletion, with crashes. Every
// invariant holds; the test fails unless each of those was reached, and
// the wind-down removed the kept prior.
func TestCephPriorsKept(t *testing.T) {
	o := Options{Ceph: true, KeepPriors: 1, Crashes: true, Backups: true, Deletion: true,
		Only: []string{"user: rotate r", "user: discard (active", "user: abort (active", "consumer", "user: lower keepPriorKeyCount", "user: delete the set", "user: delete the consumer"}}
	exploreKept(t, o, nil, envInt("REKEY_EXPLORE_CEPH_PRIORS_KEPT_DEPTH", 5), map[string]func(*World) bool{
		"trimmed at rest": func(w *World) bool {
			return cephKeep(w.Set) == 0 && w.Set.Status.LastRotationID == "r1" && cephServes(w, 2) && !cephHas(w, 1) && priorCount(w) == 0
		},
		"r2 discarded, 2 kept": func(w *World) bool {
			return w.Set.Status.LastRotationID == "r2" && cephServes(w, 3) && cephHas(w, 2) && !cephHas(w, 1) && priorCount(w) == 1
		},
		"r2 rolled back, 1 kept": func(w *World) bool {
			return w.Set.Status.LastRolledBackID == "r2" && cephServes(w, 2) && cephHas(w, 1) && !cephHas(w, 3)
		},
		"wound down": func(w *World) bool { return woundDown(w) && !cephHas(w, 1) },
	})
}

// exploreKept explores o to depth from cephKeptPath and then more, under
// each deletion policy, and fails unless every one of reach was reached.
func exploreKept(t *testing.T, o Options, more []string, depth int, reach map[string]func(*World) bool) {
	t.Helper()
	for _, policy := range []v1.DeletionPolicy{v1.DeletionDiscard, v1.DeletionDelete} {
		t.Run(string(policy), func(t *testing.T) {
			o := o
			o.Policy = policy
			all := o
			all.Only = nil // the replayed path's transitions, whatever o explores
			w := replayLabels(t, all, cephKeptPath)
			if !cephServes(w, 2) || !cephHas(w, 1) || priorCount(w) != 1 {
				t.Fatalf("the replayed path left %s; want r1 completed with generation 1 kept", w.Summary())
			}
			w = replayFrom(t, w, all, more)
			reached := map[string]bool{}
			o.Observe = func(w *World) {
				for name, ok := range reach {
					reached[name] = reached[name] || ok(w)
				}
			}
			exploreFrom(t, w, o, depth)
			for _, name := range slices.Sorted(maps.Keys(reach)) {
				if !reached[name] {
					t.Errorf("never reached: %s", name)
				}
			}
		})
	}
}

// The status and source Secret restored from the backup taken at
// generation 1, which keepPriorKeyCount kept on the monitor, while the
// pod runs generation 2: the generation-2 entity is one the status does
// not account for, reported at rest; recover restarts the pod onto
// generation 1 and resets the monitor to it (generation 2 removed). With
// crashes, the requests, the pod's restarts, the monitor's outage, the
// count lowered and deletion; the test fails unless the set came back to
// rest on generation 1 with the pod on it.
func TestCephPriorsRestored(t *testing.T) {
	o := Options{Ceph: true, KeepPriors: 1, Crashes: true, Backups: true, Deletion: true,
		Only: []string{"user: rotate r", "user: discard (active", "user: abort (active", "user: recover c1", "consumer", "mon", "user: lower keepPriorKeyCount", "user: delete the set"}}
	exploreKept(t, o, []string{"status and source Secret restored from backup"}, envInt("REKEY_EXPLORE_CEPH_PRIORS_RESTORED_DEPTH", 7), map[string]func(*World) bool{
		"restored prior served": func(w *World) bool {
			return cephServes(w, 1) && !cephHas(w, 2) && cephEntityOf(w.Pod.Creds[cephBase]) == cephEntity(1)
		},
	})
}

// TestCephPriorsWalks takes seeded random walks of the Ceph world with
// keepPriorKeyCount 1 among every transition it has, the count lowered
// and the person's rotation too.
func TestCephPriorsWalks(t *testing.T) {
	walkWorld(t, Options{Ceph: true, KeepPriors: 1, HandChanges: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true}, "the Ceph world keeping priors", 3)
}
