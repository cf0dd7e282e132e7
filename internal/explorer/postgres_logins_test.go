package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestPostgresLogins: the PostgreSQL world with two logins
// (spec.postgres.logins: app in app_owner, rep in rep_reader), each its
// own generation roles and its own Secret keys, rotated together: a
// rotation, its discard and its rollback, recover, a restore from backup,
// the replica not answering and its replay paused, deletion with each
// policy, at every step with crashes (one after each role made or
// dropped, so between the two logins' too). Every invariant holds; the
// test fails unless a rotation completed for both logins, a discard was
// cut between them (app_g1 dropped, rep_g1 not yet), a rotation was
// rolled back for both, and the set was wound down.
// REKEY_EXPLORE_POSTGRES_LOGINS_DEPTH sets the depth.
func TestPostgresLogins(t *testing.T) {
	explorePolicies(t, Options{Postgres: true, Logins: true, Crashes: true, Backups: true, Deletion: true, Only: backendOnly(pgReplica)},
		envInt("REKEY_EXPLORE_POSTGRES_LOGINS_DEPTH", 5), map[string]func(*World) bool{
			"completed": func(w *World) bool {
				st, p, r := w.Set.Status, w.instance(pgPrimary), w.instance(pgReplica)
				return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle &&
					p.acct("app_g2").Accepts("pw-r1") && p.acct("rep_g2").Accepts("rpw-r1") &&
					string(w.Dist.Data["rep.username"]) == "rep_g2" && string(w.Dist.Data["app.password"]) == "pw-r1" &&
					!p.acct("app_g1").Exists && !p.acct("rep_g1").Exists && !r.acct("app_g1").Exists && !r.acct("rep_g1").Exists
			},
			"discard cut between the logins": func(w *World) bool {
				p := w.instance(pgPrimary)
				return w.Set.Status.DiscardStarted && !p.acct("app_g1").Exists && p.acct("rep_g1").Exists
			},
			"rolled back": func(w *World) bool {
				st, p := w.Set.Status, w.instance(pgPrimary)
				return st.LastRolledBackID == "r1" && !st.ResetPending && !p.acct("app_g2").Exists && !p.acct("rep_g2").Exists &&
					p.acct("app_g1").Accepts("pw-g1") && p.acct("rep_g1").Accepts("rpw-g1")
			},
			"wound down": pgWoundDown,
		})
}
