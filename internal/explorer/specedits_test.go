package explorer

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
)

// specEditsDepth: an edit made at each stage of a rotation (mid-discard
// takes rotate, reconcile, consumer restarts, discard, a crash after the
// discard began) and the reconcile after it.
var specEditsDepth = envInt("REKEY_EXPLORE_SPECEDITS_DEPTH", 6)

// The stages a rotation passes that each spec edit must be explored at.
var editStages = []string{"Idle", "Rotating", "Distributed", "mid-discard", "resetPending"}

// The application user is removed from spec.mysql.users, and added back,
// at every stage of a rotation, its discard and its rollback, with
// crashes: rekey no longer changes a user its spec does not list (its
// consumers are the user's, docs/explorer.md), never locks out a consumer
// of a user the spec lists, and never wedges.
func TestPathSpecEditsUsers(t *testing.T) {
	explorePathEdits(t, Options{Instances: []string{"i0", "i1"}, SpecEdits: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "consumer", "user: removes APP", "user: adds APP back"}},
		"user: removes APP", "user: adds APP back")
}

// An instance is removed from the spec's instances, and added back, at
// every stage: one the spec no longer names is not rekey's until named
// again; from the reconcile after that it is held to every rule.
func TestPathSpecEditsInstances(t *testing.T) {
	explorePathEdits(t, Options{Instances: []string{"i0", "i1"}, SpecEdits: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "consumer", "user: removes i1", "user: adds i1"}},
		"user: removes i1", "user: adds i1 back")
}

// The consumer is removed from spec.consumers, and added back, at every
// stage: rekey neither restarts nor waits for a workload its spec does
// not list; listed again, it is restarted onto what the set serves.
func TestPathSpecEditsConsumers(t *testing.T) {
	explorePathEdits(t, Options{Instances: []string{"i0", "i1"}, SpecEdits: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "consumer", "user: removes web", "user: adds web"}},
		"user: removes web", "user: adds web back")
}

// explorePathEdits explores o to specEditsDepth and fails unless the
// edit was made at every stage of editStages, and its undo at each but
// mid-discard (an edit, then its undo there, takes depth 7).
func explorePathEdits(t *testing.T, o Options, edit, undo string) {
	t.Helper()
	reached := map[string]bool{}
	o.Observe = func(w *World) { reached[w.EditedAt] = true }
	explorePath(t, o, specEditsDepth)
	made := func(s, e string) bool {
		return slices.ContainsFunc(slices.Collect(maps.Keys(reached)), func(k string) bool { return strings.HasPrefix(k, s+" "+e) })
	}
	for _, s := range editStages {
		if !made(s, edit) {
			t.Errorf("%q never made while %s", edit, s)
		}
		if s != "mid-discard" && !made(s, undo) {
			t.Errorf("%q never made while %s", undo, s)
		}
	}
}

// A user added to spec.mysql.users once the set is provisioned, at every
// stage of a rotation, its discard and its rollback, with crashes (and
// removed again): added while the set is at rest, it is provisioned on its
// own (its secret stored first, made current, and so served, once every
// instance accepts it); added while a rotation or a rollback is under
// way, that one goes on without it, and it is added once it ended. No
// lockout, no wedge; specServed holds the set to serving it once Idle. It
// was never provisioned before (MissingRotationPending "restore from
// backup" on every reconcile, 2026-11-29).
func TestPathUserAdded(t *testing.T) {
	explorePathEdits(t, Options{Instances: []string{"i0", "i1"}, SpecEdits: true, UserAdds: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "consumer", "user: adds APP2", "user: removes APP2"}},
		"user: adds APP2", "user: removes APP2")
}

// A user removed from the spec while Distributed (its consumers already
// on the rotation's password), the discard done without it, then listed
// again: the source Secret still holds its pending password, with no
// rotation ID, and the set is Idle; the instances accept both passwords
// and the consumer's pod may hold either. Every reconcile used to read
// that as partial pending and skip the Idle repair, so an instance
// rebuilt empty was never given the user again and refused the pod's
// password (ten steps, 2026-11-29). Now the upkeep keeps both valid
// (RepairBoth) and the reconcile starts a recovery of its own: the pod
// restarts onto the current password, then the reset drops the other.
// The path is replayed to the relisting, then explored from there with
// scaling, rebuilt instances, consumer restarts, requests and crashes.
func TestPathUserListedAgain(t *testing.T) {
	o := Options{Instances: []string{"i0", "i1"}, SpecEdits: true, Scaling: true, Crashes: true}
	w := replay(t, o, []Transition{
		{"user: rotate r1", annotate(engine.RotateAnnotation, "r1")},
		{"reconcile", reconcileStep},
		{"consumer pod restarts", restartPod},
		{"user: removes APP from spec.mysql.users", setUsers(AppKey, false)},
		{"user: discard (active ID)", activeRequest(engine.DiscardAnnotation)},
		{"reconcile", reconcileStep},
		{"user: adds APP back to spec.mysql.users", setUsers(AppKey, true)},
	})
	if got := string(w.Source.Data[engine.PendingKey(AppKey)]); got != "APP-r1" || w.Pod.Creds[AppKey] != "APP-r1" {
		t.Fatalf("the replay no longer reaches the leftover (source pending %q, pod holds %q): %s", got, w.Pod.Creds[AppKey], w.Summary())
	}
	o.Only = []string{"reconcile", "consumer", "i1 scaled in", "i1 returns", "user: rotate r2", "user: recover c1", "user: removes APP"}
	recovered, rebuiltRepaired := false, false
	o.Observe = func(w *World) {
		st := w.Set.Status
		if st.LastRecoverID == engine.LeftoverRecoverID(w.Set.Generation) && !st.ResetPending && len(w.Source.Data[engine.PendingKey(AppKey)]) == 0 {
			recovered = true
		}
		if i1 := w.instance("i1"); i1.Present && i1.Returned && i1.acct(AppKey).Accepts("APP-r1") && i1.acct(AppKey).Accepts("APP-0") {
			rebuiltRepaired = true
		}
	}
	exploreFrom(t, w, o, 5)
	if !recovered || !rebuiltRepaired {
		t.Errorf("never reached: the leftover's recovery completed (%v), i1 rebuilt and given both passwords (%v)", recovered, rebuiltRepaired)
	}
}

// A user removed from the spec before a rotation starts, and listed again
// while it is Distributed: the rotation began without it, so the source
// Secret holds no pending password for it. The set used to read that as
// partial pending, which is also what a pending key deleted by hand looks
// like: every reconcile refused with MissingRotationPending and repaired
// nothing, so an instance rebuilt empty refused the consumer's pod (seven
// steps, found by a depth-10 run, 2026-11-30). Now the status records the
// keys the rotation began with (status.rotationKeys): a key listed since
// is left out of it (engine.OutsideRotation), keeps its current password,
// is served and repaired with it. The path is replayed to the relisting,
// then explored from there with scaling, rebuilt instances, consumer
// restarts, requests and crashes.
func TestPathUserListedMidRotation(t *testing.T) {
	o := Options{Instances: []string{"i0", "i1"}, SpecEdits: true, Scaling: true, Crashes: true}
	w := replay(t, o, []Transition{
		{"user: rotate r1", annotate(engine.RotateAnnotation, "r1")},
		{"user: removes APP from spec.mysql.users", setUsers(AppKey, false)},
		{"reconcile", reconcileStep},
		{"user: adds APP back to spec.mysql.users", setUsers(AppKey, true)},
	})
	if st := w.Set.Status; st.RotationID != "r1" || !slices.Equal(st.RotationKeys, []string{AdminKey}) {
		t.Fatalf("the replay no longer reaches a rotation that began without APP (rotation %q, keys %v): %s", st.RotationID, st.RotationKeys, w.Summary())
	}
	o.Only = []string{"reconcile", "consumer", "i1 scaled in", "i1 returns", "user: discard (active", "user: abort (active", "user: recover c1", "user: removes APP"}
	completed, rebuiltRepaired := false, false
	o.Observe = func(w *World) {
		st := w.Set.Status
		if st.LastRotationID == "r1" && st.Phase == "Idle" && string(w.Source.Data[AppKey]) == "APP-0" && w.instance("i0").acct(AppKey).Accepts("APP-0") {
			completed = true
		}
		if i1 := w.instance("i1"); i1.Present && i1.Returned && i1.acct(AppKey).Accepts("APP-0") && i1.acct(AdminKey).Accepts("ADMIN-r1") {
			rebuiltRepaired = true
		}
	}
	exploreFrom(t, w, o, 5)
	if !completed || !rebuiltRepaired {
		t.Errorf("never reached: r1 completed with APP keeping its password (%v), i1 rebuilt and given APP's and the rotation's admin password (%v)", completed, rebuiltRepaired)
	}
}

// An instance removed from the spec while a rotation that reached it is
// rolled back, and listed again once the reset is done: it still accepts
// the rotation's passwords, which the reset dropped from the source
// Secret. rekey cannot tell that from a status restored from an older
// backup (the marks record generations), so it resets nothing by itself:
// it reports DualPasswordExists naming recover, and recover resets it
// ("nothing lost" excuses the secret meanwhile: noteUnreset). The seeded
// random walks found it (39 steps, once the failover transitions changed
// their choices, 2026-11-30); the test fails unless that instance was
// listed again holding such a password and recover then left it one.
func TestPathRollbackWithoutInstance(t *testing.T) {
	listedBack := false
	o := Options{Instances: []string{"i0", "i1"}, SpecEdits: true,
		Only: []string{"user: rotate r1", "user: abort (active", "consumer", "user: removes i1", "user: adds i1"}}
	o.Observe = func(w *World) {
		if in := w.instance("i1"); len(w.Unreset) > 0 && listedIn(w.Set, in.Name) && in.acct(AdminKey).Dual() {
			listedBack = true
		}
	}
	explorePath(t, o, 9)
	if !listedBack {
		t.Error("never reached: i1 listed again holding the rolled-back passwords")
	}

	// The shortest such path, then recover.
	w := replay(t, o, []Transition{
		{"user: rotate r1", annotate(engine.RotateAnnotation, "r1")},
		{"reconcile", reconcileStep},
		{"user: removes i1 from spec.mysql.instances", setInstance("i1", false)},
		{"user: abort (active ID)", activeRequest(engine.AbortAnnotation)},
	})
	// The rollback: the pod restarts onto the current passwords, then the
	// reset, on i0 alone.
	for i := 0; i < 5 && (w.Set.Status.ResetPending || w.Set.Status.RotationID != ""); i++ {
		reconcileStep(w)
		restartPod(w)
	}
	setInstance("i1", true)(w)
	reconcileStep(w)
	if i1 := w.instance("i1"); !i1.acct(AdminKey).Dual() || !strings.HasPrefix(first(w.Warnings), "DualPasswordExists:") {
		t.Fatalf("the replay no longer leaves i1 with the rolled-back passwords, reported: %s %v", w.Summary(), w.Warnings)
	}
	o.Only = []string{"reconcile", "consumer", "user: recover c1"}
	reset := false
	o.Observe = func(w *World) {
		i1, st := w.instance("i1"), w.Set.Status
		if st.LastRecoverID == "c1" && !st.ResetPending && !i1.acct(AdminKey).Dual() && !i1.acct(AppKey).Dual() {
			reset = true
		}
	}
	exploreFrom(t, w, o, 5)
	if !reset {
		t.Error("never reached: recover c1 done, i1 left with one password per user")
	}
}
