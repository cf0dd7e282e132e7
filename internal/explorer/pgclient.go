package explorer

// A client outside the set's consumers (a job that read the distribution
// Secret and is not among spec.consumers): it logs in as the current login
// and keeps its session until it ends by itself, a person ends it (as a
// refusal naming its session says), or rekey ends it
// (spec.postgres.terminateSessions). Once per path. What it holds is not
// covered by "no lockout": it is not one of the set's consumers, which is
// what terminateSessions cuts off by design.
//
// The model keeps its session as entries of the primary's Users that are
// no role (Exists false, so no invariant, generation or login counts
// them): pgClient names the role its open session is logged in as;
// pgClientGone, once it ended by itself or by a person; pgClientCut, once
// rekey ended it.
const (
	pgClient     = "~client"
	pgClientGone = "~client-ended"
	pgClientCut  = "~client-terminated"
)

// pgClientRole is the role the outside client's open session is logged
// in as ("": none).
func pgClientRole(primary *Instance) string { return primary.acct(pgClient).Primary }

// pgClientEnd ends its session: into, pgClientGone or pgClientCut.
func pgClientEnd(primary *Instance, into string) {
	role := pgClientRole(primary)
	delete(primary.Users, pgClient)
	primary.set(into, Account{Primary: role})
}

func pgClientTransitions() []Transition {
	return []Transition{
		{"outside client: a job not among spec.consumers logs in as the served login", func(w *World) bool {
			p := pgPrimaryIn(w)
			if w.Gone || w.Dist == nil || p.Down || p.acct(pgClient).Primary != "" || p.acct(pgClientGone).Primary != "" || p.acct(pgClientCut).Primary != "" {
				return false
			}
			l := pgLoginsOf(w.Set)[0]
			user := string(w.Dist.Data[l.userKey()])
			if !p.acct(user).Accepts(string(w.Dist.Data[l.passwordKey()])) {
				return false
			}
			p.set(pgClient, Account{Primary: user})
			pgSync(w)
			return true
		}},
		{"outside client: its session ends", func(w *World) bool {
			p := pgPrimaryIn(w)
			if pgClientRole(p) == "" {
				return false
			}
			pgClientEnd(p, pgClientGone)
			pgSync(w)
			return true
		}},
	}
}

// pgClientDrain is the drain's step for it: a person ends its session
// (pg_terminate_backend), as a refusal naming it says.
func pgClientDrain(c *World) string {
	p := pgPrimaryIn(c)
	if pgClientRole(p) == "" {
		return ""
	}
	pgClientEnd(p, pgClientGone)
	pgSync(c)
	return "a person ends the outside client's session (pg_terminate_backend), as the refusal says"
}
