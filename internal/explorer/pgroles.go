package explorer

import (
	"fmt"
	"slices"
	"sort"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// The PostgreSQL backend's steps on the model's roles (roles.go,
// generations.go, conn.go), that pgmodel.go's decisions are made of.

// topology: every instance answers (the replica having replayed what it
// can first), or nothing is done. The primary is returned.
func (b *pgBackend) topology() (*Instance, error) {
	pgSync(b.w)
	for _, name := range []string{pgPrimary, pgReplica} {
		if in := b.w.instance(name); in == nil || !in.Present || in.Down {
			return nil, &engine.UnreachableError{Instance: name, Err: errDown}
		}
	}
	return pgPrimaryIn(b.w), nil
}

// requireGroups refuses to go on while a login's group is missing.
func (b *pgBackend) requireGroups(primary *Instance, ids []pgIdentity, r reason.Reason) error {
	for _, id := range ids {
		if !primary.acct(id.group).Exists {
			return &engine.Refusal{Reason: string(r), Message: fmt.Sprintf(
				"role %s (a login's group in spec.postgres) does not exist on %s: create it (CREATE ROLE %s NOLOGIN) and give it the application's objects and grants, then rekey goes on", id.group, primary.Name, id.group)}
		}
	}
	return nil
}

func (b *pgBackend) notOwned(name, what string) error {
	return &engine.Refusal{Reason: string(reason.NotOwned), Message: fmt.Sprintf(
		"role %s exists but rekey did not create it for this CredentialSet (its comment lacks this set's mark), so rekey will not %s it: drop or rename it if nobody uses it, or choose another postgres.login.base", name, what)}
}

// ensureLogin makes the login exist on the primary with pw, a member of
// the group and marked (one transaction); the replica replays it.
func (b *pgBackend) ensureLogin(primary *Instance, name, pw string) error {
	if a := primary.acct(name); a.Exists && !a.Marked {
		return b.notOwned(name, "change")
	}
	primary.set(name, Account{Exists: true, Primary: pw, Marked: true})
	pgSync(b.w)
	failpoint.Hit("postgres/login-ensured")
	return nil
}

// waitReplay: a replica that does not replay stops the phase.
func (b *pgBackend) waitReplay() error {
	if r := pgReplicaIn(b.w); r.Stopped {
		return &engine.UnreachableError{Instance: r.Name, Err: fmt.Errorf("has not replayed the primary's WAL within 1m0s (replication stopped or lagging): no password is given out until it has")}
	}
	return nil
}

// proven: name logs in with pw on every instance (the replica with what
// it replayed).
func (b *pgBackend) proven(name, pw string, why reason.Reason, next string) error {
	for _, in := range []string{pgPrimary, pgReplica} {
		if !b.w.instance(in).acct(name).Accepts(pw) {
			return &engine.Refusal{Reason: string(why), Message: fmt.Sprintf(
				"role %s does not log in on %s with the password the source Secret holds for it: %s", name, in, next)}
		}
	}
	return nil
}

// apply is ensureLogin of each of ids, the replay wait (also for none),
// and the proof of each everywhere.
func (b *pgBackend) apply(primary *Instance, ids []pgIdentity) error {
	for _, id := range ids {
		if err := b.ensureLogin(primary, id.user, id.pw); err != nil {
			return err
		}
	}
	if err := b.waitReplay(); err != nil {
		return err
	}
	for _, id := range ids {
		if err := b.proven(id.user, id.pw, reason.BackendError, "rekey just set it, so something else decides logins: check pg_hba.conf (scram-sha-256 or md5 for these roles) and that hosts lists one cluster"); err != nil {
			return err
		}
	}
	return nil
}

// sessions: the consumer's pod is logged in as each role it holds, while
// that role exists and logs in (terminateSessions' NOLOGIN, below, keeps
// it from logging in again once its session was ended); the outside
// client (pgclient.go) as the role it logged in as.
func (b *pgBackend) sessions(primary *Instance, name string) bool {
	if pgClientRole(primary) == name {
		return true
	}
	if a := primary.acct(name); b.w.WebGone || !a.Exists || a.Primary == "" {
		return false
	}
	for _, l := range b.logins() {
		if b.w.Pod.Creds[l.userKey()] == name {
			return true
		}
	}
	return false
}

// dropLogin drops the role once no session uses it; with
// terminateSessions it ends them first. The replay is waited for.
func (b *pgBackend) dropLogin(primary *Instance, name string, why reason.Reason) error {
	if b.terminate() {
		if err := b.endSessions(primary, name); err != nil {
			return err
		}
	}
	if b.sessions(primary, name) {
		return &engine.Refusal{Reason: string(why), Message: fmt.Sprintf(
			"role %s still has 1 session(s): %s pid 100 (web from 10.0.0.9). rekey drops it only once they end, so that no client is cut off: restart the clients that still log in as %s (they are not among this set's consumers), or end the sessions with pg_terminate_backend; rekey retries by itself", name, primary.Name, name)}
	}
	delete(primary.Users, name)
	pgSync(b.w)
	// Done only once the replica has it (TestModelFailover): a promotion
	// without it would let the role in again.
	if err := b.waitReplay(); err != nil {
		return err
	}
	failpoint.Hit("postgres/login-dropped")
	return nil
}

// generations are the primary's roles that are the set's of login base:
// marked <base>_g<N>.
func (b *pgBackend) generations(primary *Instance, base string) []string {
	var names []string
	for name, a := range primary.Users {
		if _, ok := pgGenerationOf(base, name); ok && a.Exists && a.Marked {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// removeGenerations drops login base's roles other than keep.
func (b *pgBackend) removeGenerations(primary *Instance, base string, why reason.Reason, keep ...string) error {
	for _, g := range b.generations(primary, base) {
		if slices.Contains(keep, g) {
			continue
		}
		if err := b.dropLogin(primary, g, why); err != nil {
			return err
		}
	}
	return nil
}

// endSessions (terminateSessions): ALTER ROLE NOLOGIN on the primary (the
// model keeps no password for a role that does not log in: rekey gives it
// LOGIN back only with a password, ALTER ROLE ... WITH LOGIN PASSWORD),
// the replay waited for (a replica that does not replay stops it there,
// the role NOLOGIN on the primary and not dropped), then
// pg_terminate_backend on every instance: every session as the role ends
// (the pod's, the outside client's), and none logs in again.
func (b *pgBackend) endSessions(primary *Instance, name string) error {
	a := primary.acct(name)
	a.Primary = ""
	primary.set(name, a)
	pgSync(b.w)
	if err := b.waitReplay(); err != nil {
		return err
	}
	if pgClientRole(primary) == name {
		pgClientEnd(primary, pgClientCut)
		pgSync(b.w)
	}
	return nil
}
