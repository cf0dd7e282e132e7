package explorer

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// pgOutsideOnly are the transitions of the PostgreSQL tests with the
// outside client (pgclient.go): the user's rotation, discard and abort,
// the consumer, the replica, the outside client and deletion (recover and
// restores are TestPostgres's).
func pgOutsideOnly() []string {
	return []string{"user: rotate r1", "user: discard (active", "user: abort (active", "consumer", pgReplica, "outside client", "user: delete the set", "user: delete the consumer"}
}

// TestPostgresTerminateSessions: the PostgreSQL world with
// spec.postgres.terminateSessions: dropping a role ends its sessions
// (NOLOGIN, the replay waited for, pg_terminate_backend) instead of being
// refused while one uses it. A rotation, its discard and its rollback,
// the replica not answering and its replay paused, a client outside the consumers logging in as the served
// login, deletion with each policy, at every step with crashes. Every
// invariant holds; the test fails unless a rotation completed, a drop
// ended the outside client's session, a drop stopped at the replay wait
// left a role NOLOGIN on the primary (the paused replica still letting it
// in), and the set was wound down.
// REKEY_EXPLORE_POSTGRES_TERMINATE_DEPTH sets the depth.
func TestPostgresTerminateSessions(t *testing.T) {
	explorePolicies(t, Options{Postgres: true, TerminateSessions: true, Crashes: true, Backups: true, Deletion: true, Only: pgOutsideOnly()},
		envInt("REKEY_EXPLORE_POSTGRES_TERMINATE_DEPTH", 6), map[string]func(*World) bool{
			"completed": func(w *World) bool {
				st, p := w.Set.Status, w.instance(pgPrimary)
				return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && p.acct("app_g2").Accepts("pw-r1") && !p.acct("app_g1").Exists
			},
			"a drop ended the outside client's session": func(w *World) bool {
				return w.instance(pgPrimary).acct(pgClientCut).Primary != ""
			},
			"NOLOGIN awaiting the replay": func(w *World) bool {
				p, r := w.instance(pgPrimary), w.instance(pgReplica)
				return r.Stopped && p.acct("app_g1").Exists && p.acct("app_g1").Primary == "" && r.acct("app_g1").Accepts("pw-g1")
			},
			"wound down": pgWoundDown,
		})
}

// TestPostgresOutsideSession: the same world without terminateSessions:
// the outside client's session holds the drop of its role back
// (DiscardRefused, or UsersInUse at the deletion, naming the session and
// pg_terminate_backend), and the way on is to end it (no wedge takes that
// step). The test fails unless a discard was refused for it.
func TestPostgresOutsideSession(t *testing.T) {
	explorePolicies(t, Options{Postgres: true, Crashes: true, Backups: true, Deletion: true, Only: pgOutsideOnly()},
		envInt("REKEY_EXPLORE_POSTGRES_TERMINATE_DEPTH", 6), map[string]func(*World) bool{
			"a discard refused for the outside client's session": func(w *World) bool {
				for _, m := range w.Warnings {
					if strings.HasPrefix(m, string(reason.DiscardRefused)+":") && strings.Contains(m, "session(s)") {
						return pgClientRole(w.instance(pgPrimary)) != ""
					}
				}
				return false
			},
		})
}
