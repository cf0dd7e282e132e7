package explorer

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// pgFailoverOnly are the transitions of TestPostgresFailover: the user's
// requests, the consumer, the replica, the primary not answering and the
// replica promoted, with all the primary committed or without what it had
// not replayed (asynchronous replication). The latter lost a drop the
// primary had made (the retired login, with its password and the set's
// mark, or a deleted set's roles, came back) until the backend waited for
// a drop's, and a release's, replay.
func pgFailoverOnly(more ...string) []string {
	return append([]string{"consumer", "the replica", "the primary", "failover: the replica promoted"}, more...)
}

// TestPostgresFailover: the PostgreSQL world with the primary not
// answering and a failover (pgfailover.go): the replica promoted while
// the primary does not answer, the old primary returning as its replica.
// Among a rotation, its discard and rollback, recover, a restore,
// deletion with each policy, at every step with crashes. Every invariant
// holds; the test fails unless a step was held naming the primary, and
// again, after the promotion, naming the old primary (replayed), and a
// set was wound down on the promoted primary; from a rotation distributed
// (and from its rollback begun), a step deeper, unless it completed (was
// rolled back) on the promoted primary with the old one its replica. REKEY_EXPLORE_POSTGRES_FAILOVER_DEPTH sets the depth.
func TestPostgresFailover(t *testing.T) {
	depth := envInt("REKEY_EXPLORE_POSTGRES_FAILOVER_DEPTH", 5)
	held := func(w *World) bool {
		for _, m := range w.Warnings {
			if strings.HasPrefix(m, "InstanceUnreachable: instance "+pgPrimary+" ") {
				return true
			}
		}
		return false
	}
	promoted := func(w *World) bool { return !w.instance(pgReplica).RO && w.instance(pgPrimary).RO }
	explorePolicies(t, Options{Postgres: true, Failover: true, Crashes: true, Backups: true, Deletion: true,
		Only: pgFailoverOnly("user: rotate r1", "user: discard (active", "user: abort (active", "user: recover c1", "status and source", "user: delete the set", "user: delete the consumer")},
		depth, map[string]func(*World) bool{
			"a step held naming the primary":     func(w *World) bool { return held(w) && !promoted(w) },
			"wound down on the promoted primary": func(w *World) bool { return pgWoundDown(w) && promoted(w) },
		})
	// The state a reconcile held after the promotion is also reached with
	// the promotion last (a state is explored once): replayed.
	w := replay(t, Options{Postgres: true, Failover: true}, []Transition{{"rotate r1", annotate(engine.RotateAnnotation, "r1")},
		{"the primary stops answering", pgPrimaryDown(true)}, {"failover", pgPromote(true)}, {"reconcile", reconcileStep}})
	if !held(w) || !promoted(w) || w.Set.Status.Phase != v1.PhaseIdle {
		t.Errorf("a reconcile after the promotion, the old primary down, was not held naming it: %s %v", w.Summary(), w.Warnings)
	}
	// From a rotation distributed, and from its rollback begun (the
	// consumers asked to restart onto the current login).
	for _, c := range []struct {
		name string
		path []Transition
	}{
		{"completed", []Transition{{"rotate r1", annotate(engine.RotateAnnotation, "r1")}, {"reconcile", reconcileStep}}},
		{"rolled back", []Transition{{"rotate r1", annotate(engine.RotateAnnotation, "r1")}, {"reconcile", reconcileStep},
			{"abort", activeRequest(engine.AbortAnnotation)}, {"reconcile", reconcileStep}, {"reconcile", reconcileStep}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reached := false
			o := Options{Postgres: true, Failover: true, Crashes: true, Only: pgFailoverOnly("user: discard (active", "user: abort (active"),
				Observe: func(w *World) {
					st, p, r := w.Set.Status, w.instance(pgReplica), w.instance(pgPrimary)
					on := promoted(w) && !r.Down && !r.Stopped && w.Pod.Template == w.template() && st.Phase == v1.PhaseIdle
					if c.name == "completed" {
						reached = reached || on && st.LastRotationID == "r1" && !p.acct("app_g1").Exists && !r.acct("app_g1").Exists &&
							p.acct("app_g2").Accepts("pw-r1") && r.acct("app_g2").Accepts("pw-r1") && w.Pod.Creds[pgUserKey] == "app_g2"
						return
					}
					reached = reached || on && st.LastRolledBackID == "r1" && !st.ResetPending && !p.acct("app_g2").Exists && !r.acct("app_g2").Exists &&
						p.acct("app_g1").Accepts("pw-g1") && r.acct("app_g1").Accepts("pw-g1") && w.Pod.Creds[pgUserKey] == "app_g1"
				}}
			exploreFrom(t, replay(t, o, c.path), o, depth+1)
			if !reached {
				t.Errorf("never reached the rotation %s on the promoted primary, the old one its replica, the pod on it", c.name)
			}
		})
	}
}
