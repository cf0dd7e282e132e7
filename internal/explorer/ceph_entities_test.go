package explorer

import (
	"maps"
	"slices"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// startTwoEntities is the Ceph world whose spec then lists client.two
// too (EntitiesAnnotation, a spec edit): reconciled until rekey minted it
// beside client.app's generation and served both, the pod restarted onto
// both, and the backup taken then.
func startTwoEntities(t *testing.T, o Options) *World {
	t.Helper()
	w := addSecondEntity(t, o)
	if o.Backups {
		w.Backup = &Backup{Status: *w.Set.Status.DeepCopy(), Source: w.Source.DeepCopy().Data}
	}
	return w
}

// addSecondEntity is the Ceph world whose spec then lists client.two, served
// and run by the pod; its backup (with Backups) is Start's, from before.
func addSecondEntity(t *testing.T, o Options) *World {
	t.Helper()
	w, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	w.Set.Annotations[EntitiesAnnotation] = "2"
	w.Set.Generation++
	for i := 0; i < 5 && !specServed(w); i++ {
		if _, err := w.Reconcile(""); err != nil {
			t.Fatalf("serving %s: %v (%v)", cephBase2, err, w.Warnings)
		}
	}
	if _, err := w.Reconcile(""); err != nil {
		t.Fatal(err)
	}
	restartPod(w)
	if cephEntityOf(w.Pod.Creds[cephBase2]) != cephEntityIn(cephBase2, 1) || cephEntityOf(w.Pod.Creds[cephBase]) != cephEntity(1) {
		t.Fatalf("%s was not served beside %s at generation 1: %s %v", cephBase2, cephBase, w.Summary(), w.Warnings)
	}
	w.Warnings = nil
	return w
}

// The set's spec gained client.two, which the pod runs; the set is deleted
// with deletionPolicy Discard, and its status and source Secret restored
// from a backup taken before client.two was added. The wind-down used to
// remove client.two.1 as a generation nobody was given, locking the pod
// out (3 steps, 128 states in the two-entity world); now it removes
// nothing and names the way out (the key put back, or Retain), which the
// "no wedge" drain takes. The test fails unless the exploration reached
// that state and the replayed path shows the hold.
func TestPathCephRestoreBeforeEntityAdded(t *testing.T) {
	exposed := false
	o := Options{Ceph: true, Backups: true, Deletion: true, Policy: v1.DeletionDiscard,
		Only: []string{"user: delete the set", "status and source Secret restored", "consumer"},
		Observe: func(w *World) {
			exposed = exposed || w.deleted() && w.Source != nil && w.Source.Data[cephBase2] == nil &&
				cephEntityOf(w.Pod.Creds[cephBase2]) == cephEntityIn(cephBase2, 1)
		}}
	start := addSecondEntity(t, o)
	exploreFrom(t, start, o, 4)
	if !exposed {
		t.Error("never reached the deleted set whose source Secret lacks client.two's key while the pod runs client.two.1")
	}
	w := replayFrom(t, start, o, []string{"user: delete the set", "status and source Secret restored from backup", "reconcile"})
	if !says(w, cephUnknownKey) || !w.instance(cephMon).acct(cephEntityIn(cephBase2, 1)).Exists || w.Gone {
		t.Errorf("the wind-down did not hold with client.two.1 kept: %s %v", w.Summary(), w.Warnings)
	}
}

// both: both entities' generation g exist (want) or neither does.
func both(w *World, g int64, want bool) bool {
	in := w.instance(cephMon)
	return in.acct(cephEntity(g)).Exists == want && in.acct(cephEntityIn(cephBase2, g)).Exists == want
}

// The Ceph world with two entities (cephentities.go): a rotation, its
// discard and rollback, recover, a restore, the monitor's outage and
// deletion with each policy, with crashes (between one entity's step and
// the other's too). Every invariant holds for both; the test fails unless
// a crash left one entity's new generation made and not the other's, a
// rotation completed (both first generations removed, the pod on both
// second ones), one was rolled back (both second generations removed) and
// the set was wound down.
func TestCephEntities(t *testing.T) {
	o := Options{Ceph: true, Crashes: true, Backups: true, Deletion: true, Only: backendOnly("mon")}
	reach := map[string]func(*World) bool{
		"half applied": func(w *World) bool {
			in := w.instance(cephMon)
			return w.Set.Status.RotationID == "r1" && in.acct(cephEntity(2)).Exists && !in.acct(cephEntityIn(cephBase2, 2)).Exists
		},
		"completed": func(w *World) bool {
			st := w.Set.Status
			return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && both(w, 1, false) && both(w, 2, true) &&
				cephEntityOf(w.Pod.Creds[cephBase2]) == cephEntityIn(cephBase2, 2)
		},
		"rolled back": func(w *World) bool {
			st := w.Set.Status
			return st.LastRolledBackID == "r1" && !st.ResetPending && both(w, 2, false) && both(w, 1, true)
		},
		"wound down": woundDown,
	}
	for _, policy := range []v1.DeletionPolicy{v1.DeletionDiscard, v1.DeletionDelete} {
		t.Run(string(policy), func(t *testing.T) {
			o := o
			o.Policy = policy
			w := startTwoEntities(t, o)
			reached := map[string]bool{}
			o.Observe = func(w *World) {
				for name, ok := range reach {
					reached[name] = reached[name] || ok(w)
				}
			}
			exploreFrom(t, w, o, envInt("REKEY_EXPLORE_CEPH_ENTITIES_DEPTH", 5))
			for _, name := range slices.Sorted(maps.Keys(reach)) {
				if !reached[name] {
					t.Errorf("never reached: %s", name)
				}
			}
		})
	}
}

// TestCephEntitiesWalks takes seeded random walks of the Ceph world with
// two entities and keepPriorKeyCount 1 among every transition it has (the
// person's rotation is client.app's).
func TestCephEntitiesWalks(t *testing.T) {
	o := Options{Ceph: true, KeepPriors: 1, HandChanges: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true}
	// Start's backup, from before client.two was added
	// (TestPathCephRestoreBeforeEntityAdded).
	start := addSecondEntity(t, o)
	seed := int64(envInt("REKEY_EXPLORE_SEED", 1))
	budget := time.Duration(envInt("REKEY_EXPLORE_SECONDS", 45)) * time.Second / 3
	r := Walk(start, o, seed, envInt("REKEY_EXPLORE_WALKS", 20), 40, budget)
	t.Logf("random walks of the Ceph world with two entities (seed %d): %s", seed, r)
	recordRun(t, "random walks", seed, r)
	for _, v := range r.Violations {
		t.Error(v)
	}
	if r.States == 0 {
		t.Error("no state explored")
	}
}

// Two entities; a rotation r1 aborted, its reset owed (the manager crashed
// once the rollback was recorded); a person rotates a generation of
// client.app by hand: r1's, so that the reset is refused (KeyMismatch), or
// the current one, so that the rollback's verification is
// (PendingRejected). Either names the way out: delete client.app from the
// source Secret with the pending keys. When they named client.app's
// pending key only (or, the verification, none), client.two's stayed, the
// read back (which waits for no pending key to be left) never ran, and the
// set was wedged (found by the two-entity random walks, seed 2, 100 walks:
// 23 steps; the verification's by the e2e TestCephResetAfterHandRotation).
// The test fails unless it reached both refusals with the reset owed.
func TestPathCephResetAfterHandRotation(t *testing.T) {
	reset, verify := false, false
	o := Options{Ceph: true, Crashes: true, HandChanges: true,
		Only: []string{"user: rotate r1", "user: abort (active", "someone rotates client.app"},
		Observe: func(w *World) {
			if w.Set.Status.ResetPending {
				reset = reset || says(w, "To take the cluster's key, delete "+cephBase)
				verify = verify || says(w, "otherwise delete "+cephBase+" from the source Secret (with")
			}
		}}
	exploreFrom(t, startTwoEntities(t, o), o, envInt("REKEY_EXPLORE_CEPH_RESET_DEPTH", 7))
	if !reset || !verify {
		t.Errorf("never reached, the reset owed: the reset refused (%v), the rollback's verification refused (%v)", reset, verify)
	}
}

// The rollback's refusal above (client.app's current generation rotated by
// hand) followed only in part: client.app deleted from the source Secret,
// the pending keys left. Nothing can be read back then,
// and the refusal says what is left to delete (it used to call client.app
// an identity "this backend adds only when a set is first provisioned",
// InvalidSpec); done, the set comes back to Idle with no reset owed.
func TestPathCephResetHalfFollowed(t *testing.T) {
	o := Options{Ceph: true, Crashes: true, HandChanges: true}
	w := replayFrom(t, startTwoEntities(t, o), o, []string{"user: rotate r1", "reconcile", "user: abort (active",
		"manager crashes after abort/phase-idle", "someone rotates client.app's current generation", "reconcile"})
	if !w.Set.Status.ResetPending || !says(w, "otherwise delete "+cephBase+" from the source Secret (with") {
		t.Fatalf("the rollback was not refused with a reset owed: %s %v", w.Summary(), w.Warnings)
	}
	delete(w.Source.Data, cephBase)
	w = replayFrom(t, w, o, []string{"reconcile"})
	pending := engine.PendingKey(cephBase2)
	if !says(w, "lacks current secrets ["+cephBase+"]") || !says(w, pending) || says(w, "first provisioned") {
		t.Fatalf("the refusal does not name %s: %v", pending, w.Warnings)
	}
	for _, k := range []string{engine.PendingKey(cephBase), pending, engine.RotationIDKey} {
		delete(w.Source.Data, k)
	}
	for i := 0; i < 10 && (w.Set.Status.ResetPending || w.Set.Status.Phase != v1.PhaseIdle || w.Pod.Template != w.template()); i++ {
		if w.Pod.Template != w.template() {
			restartPod(w)
		}
		w = replayFrom(t, w, o, []string{"reconcile"})
	}
	if w.Set.Status.ResetPending || w.Set.Status.Phase != v1.PhaseIdle {
		t.Fatalf("not back to Idle: %s %v", w.Summary(), w.Warnings)
	}
	if d := noLockout(w); d != "" {
		t.Fatal(d)
	}
}
