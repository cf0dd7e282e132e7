package explorer

import (
	"fmt"
	"maps"
	"slices"
)

// The PostgreSQL world's side of the invariants, traces and transitions
// (the backend model is pgmodel.go).

// NewPostgresWorld is a set with one consumer on a primary and a replica
// that hold the group role and no login of the set yet: rekey makes the
// first generation's login when it provisions.
func NewPostgresWorld() *World {
	w := newSetWorld(setName, "uid-1", distName, webName)
	w.Set.Annotations[Annotation] = PostgresWorld
	w.FixedAdmin = true // the cluster's admin is not the set's to rotate
	group := map[string]Account{pgGroup: {Exists: true}}
	w.Instances = []*Instance{
		{Name: pgPrimary, Present: true, Users: maps.Clone(group)},
		{Name: pgReplica, Present: true, Users: maps.Clone(group), RO: true, From: pgPrimary},
	}
	return w
}

// pgSync is streaming replication: the replica holds what the primary
// holds, unless it does not answer or its replay is paused (Stopped), when
// it keeps what it had replayed.
func pgSync(w *World) {
	p, r := pgPrimaryIn(w), pgReplicaIn(w)
	if p == nil || r == nil || !r.Present || r.Down || r.Stopped {
		return
	}
	r.Users = maps.Clone(p.Users)
}

// pgLagging: in is the replica and has not replayed everything the
// primary did (it does not answer, or its replay is paused). What it still
// accepts of a dropped role goes when it replays, which is PostgreSQL's
// doing: "nothing lost" and "nothing left valid after deletion" hold the
// primary, and the replica once it replays. No lockout still holds it
// while it answers (consumers log in there).
func pgLagging(w *World, in *Instance) bool {
	return w.postgres() && in.RO && (in.Down || in.Stopped)
}

// pgReplay: the replica's replay is paused or resumed, or it stops
// answering or answers again (replaying what it missed).
func pgReplay(down, paused bool) func(w *World) bool {
	return func(w *World) bool {
		r := pgReplicaIn(w)
		if r == nil || !r.Present || w.Gone || r.Down == down && r.Stopped == paused {
			return false
		}
		r.Down, r.Stopped = down, paused
		pgSync(w)
		return true
	}
}

func pgTransitions(o Options) []Transition {
	if o.Failover {
		return pgFailoverTransitions() // by role (pgfailover.go)
	}
	return []Transition{
		{pgReplica + " stops answering", func(w *World) bool {
			return !w.instance(pgReplica).Down && pgReplay(true, w.instance(pgReplica).Stopped)(w)
		}},
		{pgReplica + " answers again (replays what it missed)", func(w *World) bool {
			return w.instance(pgReplica).Down && pgReplay(false, w.instance(pgReplica).Stopped)(w)
		}},
		{pgReplica + " pauses replay (pg_wal_replay_pause)", func(w *World) bool {
			return !w.instance(pgReplica).Down && pgReplay(false, true)(w)
		}},
		{pgReplica + " resumes replay", func(w *World) bool {
			return !w.instance(pgReplica).Down && pgReplay(false, false)(w)
		}},
	}
}

// pgResume is the drain's step for the replica: its replay resumed (what
// the Unreachable "has not replayed" waits for).
func pgResume(c *World) string {
	if !c.postgres() {
		return ""
	}
	if r := pgReplicaIn(c); r != nil && r.Stopped {
		r.Stopped = false
		pgSync(c)
		return r.Name + " resumes replay (what its refusal waits for)"
	}
	return pgClientDrain(c)
}

// worldTransitions are the transitions of the backend worlds other than
// MySQL's.
func worldTransitions(o Options) []Transition {
	var out []Transition
	if o.RabbitMQ {
		out = append(out, rabbitTransitions()...)
		if o.HandChanges {
			out = append(out, rabbitHandTransitions()...)
		}
	}
	if o.Ceph || o.CephInPlace || o.CephAdmin {
		out = append(out, cephTransitions(o)...)
	}
	if o.Postgres {
		out = append(out, pgTransitions(o)...)
		out = append(out, pgClientTransitions()...)
		if o.HandChanges {
			out = append(out, pgHandTransitions()...)
		}
	}
	return out
}

// pgLeftValid is "nothing left valid after deletion" on the primary and
// on the replica once it replayed: with deletionPolicy Delete no role the
// set made is left; with Discard only the roles its consumers were given
// stay, without the set's mark, with the passwords they were given
// (generationsLeftValid's rule, for each login).
func pgLeftValid(w *World) string {
	served := map[string]string{}
	if w.Dist != nil {
		data := map[string]string{}
		for k, v := range w.Dist.Data {
			data[k] = string(v)
		}
		served = pgCredLogins(w, data)
	}
	for _, in := range w.Instances {
		if pgLagging(w, in) || !in.Present || w.returned(in) {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(in.Users)) {
			a := in.Users[name]
			if !pgRole(w, name) || !a.Exists || a.Hand || !a.Marked && a.Primary == "" {
				continue
			}
			pw, given := served[name]
			left := fmt.Sprintf("%s: the set is %s (deletionPolicy %s) and role %s", in.Name, goneOrEmptied(w), w.Set.Spec.OnDeletion(), name)
			switch {
			case a.Marked:
				return left + " still carries its mark"
			case !given && !lostElsewhere(w, in, a.Primary):
				return left + ", which its consumers were not given, still logs in"
			case given && a.Primary != pw:
				return fmt.Sprintf("%s accepts %s, while its consumers were given %s", left, a.Primary, pw)
			}
		}
	}
	return ""
}

// pgStaleRestore is rabbitStaleRestore on the primary, for each login. A
// generation the restore dropped whose password a person then changed by
// hand (pghand.go) is still one the restore dropped: its name is lost.
func pgStaleRestore(w *World) bool {
	in := pgPrimaryIn(w)
	b := &pgBackend{w: w, cs: w.Set}
	for _, l := range b.logins() {
		if in.acct(string(w.Source.Data[l.userKey()])).Accepts(string(w.Source.Data[l.passwordKey()])) {
			continue
		}
		for _, name := range b.generations(in, l.base) {
			if a := in.acct(name); slices.Contains(w.Lost, a.Primary) || a.Hand && slices.Contains(w.Lost, name) {
				return true
			}
		}
	}
	return false
}

// pgNote is the replica's replay in a trace, and the instances' roles
// after a failover (pgfailover.go).
func pgNote(in *Instance) string {
	note := ""
	if in.Name == pgReplica && !in.RO {
		note = fmt.Sprintf(" %s=promoted", in.Name)
	}
	if in.Name == pgPrimary && in.RO {
		note = fmt.Sprintf(" %s=replica-of-%s", in.Name, in.From)
	}
	if in.Stopped {
		note += fmt.Sprintf(" %s=replay-paused", in.Name)
	}
	return note
}
