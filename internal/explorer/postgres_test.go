package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// The PostgreSQL model (pgmodel.go): a rotation, its discard and its
// rollback, recover, a restore from backup, the replica not answering and
// its replay paused, deletion with each policy, at every step with
// crashes. Every invariant holds; the test fails unless a rotation
// completed (the first generation's login dropped on the primary and the
// replica), one was rolled back (the second's dropped), and the set was
// wound down (with Discard: the current login kept, unmarked; with
// Delete: none left), and unless the replica's replay was paused while a
// rotation was under way. REKEY_EXPLORE_POSTGRES_DEPTH sets the depth.
func TestPostgres(t *testing.T) {
	explorePolicies(t, Options{Postgres: true, Crashes: true, Backups: true, Deletion: true, Only: backendOnly(pgReplica)},
		envInt("REKEY_EXPLORE_POSTGRES_DEPTH", 6), map[string]func(*World) bool{
			"completed": func(w *World) bool {
				st := w.Set.Status
				return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && w.instance(pgPrimary).acct("app_g2").Accepts("pw-r1") &&
					!w.instance(pgPrimary).acct("app_g1").Exists && !w.instance(pgReplica).acct("app_g1").Exists
			},
			"rolled back": func(w *World) bool {
				st := w.Set.Status
				return st.LastRolledBackID == "r1" && !st.ResetPending && !w.instance(pgPrimary).acct("app_g2").Exists &&
					!w.instance(pgReplica).acct("app_g2").Exists && w.instance(pgReplica).acct("app_g1").Exists
			},
			"wound down": func(w *World) bool { return pgWoundDown(w) },
			"replay paused mid-rotation": func(w *World) bool {
				return w.instance(pgReplica).Stopped && w.Set.Status.Phase != v1.PhaseIdle
			},
		})
}

// TestPostgresWalks takes seeded random walks of the PostgreSQL world
// among every transition it has: the user's requests with fresh, repeated
// and stale IDs, crashes, restores, the replica not answering and its
// replay paused, a client outside the consumers holding a session,
// deletion and policy edits, stale reads.
func TestPostgresWalks(t *testing.T) {
	walkWorld(t, Options{Postgres: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true}, "the PostgreSQL world", 3)
}

// pgWoundDown: the set was wound down, no role carries its mark, and with
// Delete none of its generations is left; with Discard, each login its
// consumers were given is.
func pgWoundDown(w *World) bool {
	if !woundDown(w) {
		return false
	}
	p := w.instance(pgPrimary)
	for name, a := range p.Users {
		if pgRole(w, name) && a.Marked {
			return false // a role still carries the set's mark
		}
	}
	if w.Set.Spec.OnDeletion() == v1.DeletionDelete {
		for name := range p.Users {
			if _, ok := pgGeneration(name); ok {
				return false
			}
		}
		return true
	}
	if w.Dist == nil {
		return false
	}
	for _, l := range pgLoginsOf(w.Set) {
		if !p.acct(string(w.Dist.Data[l.userKey()])).Exists {
			return false
		}
	}
	return true
}

// TestPostgresWalksOptions takes the random walks of TestPostgresWalks in
// the PostgreSQL world with every option of spec.postgres it models: two
// logins (the second adopting the role legacy) and terminateSessions.
func TestPostgresWalksOptions(t *testing.T) {
	walkWorld(t, Options{Postgres: true, Logins: true, TerminateSessions: true, Adopt: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true},
		"the PostgreSQL world with two logins, an adopted role and terminateSessions", 3)
}
