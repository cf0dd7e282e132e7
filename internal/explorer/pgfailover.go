package explorer

import "maps"

// The PostgreSQL world's primary not answering, and a failover (option
// Failover with Postgres). What the backend does with the instances is
// conn.go's topology, at every step: it asks each instance whether it is
// in recovery, changes roles on the one that is not (the primary), waits
// for the others to replay and proves logins on all; an instance that
// does not answer stops the step (Unreachable, naming it), and two
// primaries or none are refused (ClusterUnhealthy). It keeps no memory of
// which instance was the primary: after a promotion, the next step runs on
// the promoted one. The cluster manager's steps (CloudNativePG's,
// Patroni's, a person's):
//   - the primary stops answering (crashed, partitioned) and answers
//     again;
//   - while it does not answer, the replica is promoted (pg_promote): with
//     everything the primary committed, when it had received all of it (a
//     replica whose replay is paused replays what it received before it
//     is promoted), or, when it had not (asynchronous replication: the
//     model's replica that has not replayed), without what it had not
//     replayed, which the cluster has lost;
//   - the old primary returns as the new primary's replica, rewound or
//     cloned onto it (pg_rewind, pg_basebackup): what it had and the new
//     primary has not is gone. Until then it does not answer. It is never
//     brought back as a second primary (the cluster manager fences it; the
//     backend would refuse two primaries, TestTopologyRefusals).
//
// Each is proven on a real primary and replica by TestModelFailover
// (internal/backend/postgres model_failover_test.go): the steps stop,
// naming the primary, while it does not answer, before and after the
// promotion; a replica promoted without what it had not received keeps a
// role the primary had dropped; a promoted replica whose replay was
// paused has everything; the old primary cloned onto the new one as its
// replica, every step runs on the promoted primary and waits for the old
// one's replay.

// pgPrimaryIn is the instance not in recovery; pgReplicaIn, the one in
// recovery (the model has one of each: a promotion makes the old primary
// the new one's replica at once, not answering until it is rewound).
func pgPrimaryIn(w *World) *Instance {
	for _, in := range w.Instances {
		if !in.RO {
			return in
		}
	}
	return nil
}

func pgReplicaIn(w *World) *Instance {
	for _, in := range w.Instances {
		if in.RO {
			return in
		}
	}
	return nil
}

// pgPrimaryDown: the primary stops answering, or answers again.
func pgPrimaryDown(down bool) func(*World) bool {
	return func(w *World) bool {
		p := pgPrimaryIn(w)
		if p.Down == down { // the cluster's doing, also once the set is gone
			return false
		}
		p.Down = down
		pgSync(w)
		return true
	}
}

// pgPromote: the replica is promoted while the primary does not answer;
// with all, it had received everything the primary committed.
func pgPromote(all bool) func(*World) bool {
	return func(w *World) bool {
		p, r := pgPrimaryIn(w), pgReplicaIn(w)
		if !p.Down || r.Down || !all && !r.Stopped {
			return false // without all, only a replica that has not replayed loses anything
		}
		if all {
			r.Users = maps.Clone(p.Users)
		}
		r.RO, r.From, r.Stopped = false, "", false
		p.RO, p.From, p.Stopped = true, r.Name, false
		return true
	}
}

func pgFailoverTransitions() []Transition {
	return []Transition{
		{"the replica stops answering", func(w *World) bool {
			return !pgReplicaIn(w).Down && pgReplay(true, pgReplicaIn(w).Stopped)(w)
		}},
		{"the replica answers again (replays what it missed; an old primary rewound onto the new one)", func(w *World) bool {
			return pgReplicaIn(w).Down && pgReplay(false, pgReplicaIn(w).Stopped)(w)
		}},
		{"the replica pauses replay (pg_wal_replay_pause)", func(w *World) bool {
			return !pgReplicaIn(w).Down && pgReplay(false, true)(w)
		}},
		{"the replica resumes replay", func(w *World) bool {
			return !pgReplicaIn(w).Down && pgReplay(false, false)(w)
		}},
		{"the primary stops answering", pgPrimaryDown(true)},
		{"the primary answers again", pgPrimaryDown(false)},
		{"failover: the replica promoted (the primary not answering), with all the primary committed", pgPromote(true)},
		{"failover: the replica promoted (the primary not answering), without what it had not replayed (asynchronous replication)", pgPromote(false)},
	}
}
