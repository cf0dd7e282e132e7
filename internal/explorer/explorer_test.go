package explorer

import (
	"os"
	"strconv"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// envInt reads a positive integer from the environment, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestExplore explores every state up to a depth that fits make test's
// budget (a time budget: a loaded machine explores less, never fails for
// it), then takes seeded random walks, and fails on any violation with its
// trace (the shortest, for breadth first). make explore runs it longer:
// REKEY_EXPLORE_DEPTH, REKEY_EXPLORE_SECONDS, REKEY_EXPLORE_WALKS and
// REKEY_EXPLORE_SEED.
func TestExplore(t *testing.T) {
	o := DefaultOptions()
	start, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	depth := envInt("REKEY_EXPLORE_DEPTH", 6)
	budget := time.Duration(envInt("REKEY_EXPLORE_SECONDS", 45)) * time.Second
	r := BFS(start, o, depth, budget)
	t.Logf("breadth first: %s; %d invariants in every state: %v", r, len(Invariants()), invariantNames())
	recordModel(t, o)
	recordRun(t, "breadth first", 0, r)
	for _, v := range r.Violations {
		t.Error(v)
	}
	seed := int64(envInt("REKEY_EXPLORE_SEED", 1))
	wr := Walk(start, o, seed, envInt("REKEY_EXPLORE_WALKS", 20), 40, budget/3)
	t.Logf("random walks (seed %d): %s", seed, wr)
	recordRun(t, "random walks", seed, wr)
	for _, v := range wr.Violations {
		t.Error(v)
	}
}

func invariantNames() []string {
	var out []string
	for _, inv := range Invariants() {
		out = append(out, inv.Name)
	}
	return out
}

// walkWorld takes seeded random walks of o's world within share of the
// run's time budget (REKEY_EXPLORE_SECONDS), and fails on any violation
// or when no state was explored.
func walkWorld(t *testing.T, o Options, what string, share int) {
	t.Helper()
	start, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	seed := int64(envInt("REKEY_EXPLORE_SEED", 1))
	budget := time.Duration(envInt("REKEY_EXPLORE_SECONDS", 45)) * time.Second / time.Duration(share)
	r := Walk(start, o, seed, envInt("REKEY_EXPLORE_WALKS", 20), 40, budget)
	t.Logf("random walks of %s (seed %d): %s", what, seed, r)
	recordRun(t, "random walks", seed, r)
	for _, v := range r.Violations {
		t.Error(v)
	}
	if r.States == 0 {
		t.Error("no state explored")
	}
}

// explorePath explores the transitions of o breadth first to depth and
// fails on any violation: each known path gets a run narrowed to the
// transitions it needs, so that it is found (and kept fixed) within
// seconds whatever the default run's budget reaches.
func explorePath(t *testing.T, o Options, depth int) Report {
	t.Helper()
	start, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	// Bounded by depth, not time: a loaded machine takes longer, and
	// finds the same.
	r := BFS(start, o, depth, time.Duration(1<<62))
	t.Logf("%s", r)
	recordRun(t, "breadth first", 0, r)
	for _, v := range r.Violations {
		t.Error(v)
	}
	return r
}

// reconcileStep is a reconcile as a replayed path's step.
func reconcileStep(w *World) bool { _, _ = w.Reconcile(""); return true }

// replay starts o's world and takes steps, each of which must apply: a
// known path replayed to where its test explores from.
func replay(t *testing.T, o Options, steps []Transition) *World {
	t.Helper()
	w, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if !s.Apply(w) {
			t.Fatalf("%s did not apply at %s", s.Name, w.Summary())
		}
	}
	return w
}

// exploreFrom explores o breadth first from w to depth and fails on any
// violation.
func exploreFrom(t *testing.T, w *World, o Options, depth int) Report {
	t.Helper()
	r := BFS(w, o, depth, time.Duration(1<<62))
	t.Logf("from the replayed path: %s", r)
	recordRun(t, "breadth first", 0, r)
	for _, v := range r.Violations {
		t.Error(v)
	}
	return r
}

// A set whose consumers hold the new passwords has its status and source
// Secret restored from a backup taken while Idle; rotate is refused
// (DualPasswordExists) and names recover, whose reset must not lock out
// the consumers that still hold the new passwords.
func TestPathRecoverAfterRestore(t *testing.T) {
	explorePath(t, Options{Instances: []string{"i0"}, Backups: true,
		Only: []string{"user: rotate r1", "user: recover c1", "user: discard (active", "consumer", "status"}}, 8)
}

// A DBA changes a user on one instance while a rotation is Distributed:
// repair cannot tell which password its consumers hold, and a discard
// must not start, or the rotation can neither finish nor roll back.
func TestPathDiscardPastUnrepaired(t *testing.T) {
	explorePath(t, Options{Instances: []string{"i0", "i1"}, HandChanges: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "consumer", "DBA sets APP on i0"}}, 7)
}

// A recover request made after a discard began (a crash right after it
// was recorded) is refused, and the refusal says to remove it: once
// removed, the rotation completes.
func TestPathRecoverWhileCommitted(t *testing.T) {
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: recover c1", "consumer"}}, 7)
}

// A manager whose cache holds the set as it was before its last status
// change reconciles at every step of a rotation, a discard and a
// rollback, with crashes: it must neither serve the distribution Secret
// from its stale status (a consumer restarting would read secrets a later
// discard retires) nor repair an instance from it (the discarded password
// would be valid again). Found with REKEY_EXPLORE_STALE=1; both writes now
// confirm the status they were decided from.
func TestPathStaleReads(t *testing.T) {
	explorePath(t, Options{Instances: []string{"i0", "i1"}, StaleReads: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "consumer"}}, 8)
}

// During a rollback the backend refuses the current secrets (a DBA set
// the user by hand), so the distribution Secret keeps the rotation's: a
// consumer restarted then would read them and count as rolled out, and
// the reset, once the DBA set the user back, would refuse it. Restarts
// wait until the distribution Secrets hold what they are for.
func TestPathRestartWhileUnserved(t *testing.T) {
	explorePath(t, Options{Instances: []string{"i0"}, HandChanges: true,
		Only: []string{"user: rotate r1", "user: abort (active", "consumer", "DBA sets APP on i0 by hand (IDENTIFIED BY, DISCARD", "DBA sets APP on i0 back"}}, 9)
}

// An instance stops answering at every step of a rotation, a discard and
// a rollback, and answers again: the health gate holds each phase.
func TestPathOutage(t *testing.T) {
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Crashes: true, Outages: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "consumer", "i1"}}, 7)
}

// The set is deleted at every step of a rotation, a discard and a
// rollback, with and without crashes, and its deletionPolicy set to
// Retain (and back) before or after: no consumer is locked out, a set
// deleted with Discard goes away leaving nothing but what its consumers
// were given valid, and one deleted mid-rotation waits only for what it
// names.
func TestPathDeletion(t *testing.T) {
	reached := map[string]bool{}
	// Restores from backup only with the known paths: the default run
	// explores them with deletion, to a lesser depth.
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Crashes: true, Deletion: true, Backups: deletionFindings, PolicyEdits: deletionFindings,
		Only:    []string{"user: rotate r1", "user: discard (active", "user: abort (active", "user: delete", "user: set deletionPolicy", "consumer", "status"},
		Observe: observeDeletion(reached)}, deletionDepth())
	for _, want := range []string{"gone, deletionPolicy Discard, after a rotation", "gone, deletionPolicy Retain, mid-rotation", "waiting for a rotation in flight"} {
		if !reached[want] {
			t.Errorf("never reached a set %s: %v", want, reached)
		}
	}
}

// observeDeletion notes the deletion outcomes a run reached.
func observeDeletion(reached map[string]bool) func(*World) {
	return func(w *World) {
		st := w.Set.Status
		switch {
		case w.Gone && st.KeyGeneration > 1 && w.Set.Spec.OnDeletion() == v1.DeletionDiscard:
			reached["gone, deletionPolicy Discard, after a rotation"] = true
		case w.Gone && engine.RotationInFlight(st) && w.Set.Spec.OnDeletion() == v1.DeletionRetain:
			reached["gone, deletionPolicy Retain, mid-rotation"] = true
		case w.deleted() && !w.Gone && len(w.Waiting) > 0:
			reached["waiting for a rotation in flight"] = true
		case w.Gone && w.Set.Spec.OnDeletion() == v1.DeletionDelete && w.WebGone && !w.Instances[0].acct(AppKey).Exists:
			reached["gone, deletionPolicy Delete, its user dropped"] = true
		case w.deleted() && !w.Gone && w.Set.Spec.OnDeletion() == v1.DeletionDelete && !w.WebGone && !engine.RotationInFlight(st) && st.KeyGeneration > 1:
			// What keeps it then is its consumer: no lockout and no
			// wedge are checked here.
			reached["deleted after a rotation, its consumer running"] = true
		}
	}
}

// deletionDepth: the known deletion paths need 8 steps (docs/explorer.md);
// without them 7 cover every phase a set can be deleted in.
func deletionDepth() int {
	if deletionFindings {
		return 8
	}
	return 7
}

// A set with deletionPolicy Delete whose application user rekey created
// is deleted at every step of a rotation: it waits for its consumer to be
// deleted, then drops that user (and only it: the admin stays), and never
// locks out the consumer while it runs.
func TestPathDeletePolicy(t *testing.T) {
	reached := map[string]bool{}
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Crashes: true, Deletion: true, Policy: v1.DeletionDelete,
		AppMade: true, PolicyEdits: deletionFindings, Observe: observeDeletion(reached),
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "user: delete", "user: set deletionPolicy", "consumer"}}, 7)
	for _, want := range []string{"gone, deletionPolicy Delete, its user dropped", "deleted after a rotation, its consumer running"} {
		if !reached[want] {
			t.Errorf("never reached a set %s: %v", want, reached)
		}
	}
}

// explorePolicies explores o with deletionPolicy Discard and then Delete,
// each breadth first to depth, and fails unless every state reach names
// was reached in each (the test's proof that it explored what it is
// about).
func explorePolicies(t *testing.T, o Options, depth int, reach map[string]func(*World) bool) {
	t.Helper()
	for _, policy := range []v1.DeletionPolicy{v1.DeletionDiscard, v1.DeletionDelete} {
		t.Run(string(policy), func(t *testing.T) {
			o := o
			o.Policy = policy
			exploreReach(t, o, depth, reach)
		})
	}
}

// backendOnly are the transitions a backend world's breadth-first test
// explores: the user's requests, the consumer, the backend's instance
// (named so), restores and deletion.
func backendOnly(instance string) []string {
	return []string{"user: rotate r1", "user: discard (active", "user: abort (active", "user: recover c1", "consumer", instance, "status and source", "user: delete the set", "user: delete the consumer"}
}
