package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestPostgresAdopt: the PostgreSQL world with spec.postgres.adopt: the
// role applications log in as before rekey, legacy, is proven with its
// password, claimed (marked, its password kept) and distributed as
// generation 1. A rotation, its discard and its rollback, recover, a
// restore from backup, the replica not answering and its replay paused,
// deletion with each policy, at every step with crashes. Every invariant
// holds; the test fails unless the first rotation completed (legacy
// dropped on both instances), one was rolled back onto legacy, and the
// set was wound down while legacy was current, handing it back without
// the set's mark and with its password (Delete too: rekey did not make
// it). REKEY_EXPLORE_POSTGRES_ADOPT_DEPTH sets the depth.
func TestPostgresAdopt(t *testing.T) {
	explorePolicies(t, Options{Postgres: true, Adopt: true, Crashes: true, Backups: true, Deletion: true, Only: backendOnly(pgReplica)},
		envInt("REKEY_EXPLORE_POSTGRES_ADOPT_DEPTH", 5), map[string]func(*World) bool{
			"completed": func(w *World) bool {
				st, p, r := w.Set.Status, w.instance(pgPrimary), w.instance(pgReplica)
				return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && p.acct("app_g2").Accepts("pw-r1") &&
					!p.acct(pgAdopted).Exists && !r.acct(pgAdopted).Exists
			},
			"rolled back onto the adopted role": func(w *World) bool {
				st, p := w.Set.Status, w.instance(pgPrimary)
				return st.LastRolledBackID == "r1" && !st.ResetPending && !p.acct("app_g2").Exists &&
					p.acct(pgAdopted).Accepts(pgAdoptedPassword) && p.acct(pgAdopted).Marked
			},
			"wound down, the adopted role handed back": func(w *World) bool {
				a := w.instance(pgPrimary).acct(pgAdopted)
				return pgWoundDown(w) && a.Accepts(pgAdoptedPassword) && !a.Marked
			},
		})
}
