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
	return b.w.instance(pgPrimary), nil
}

// identity is the login s holds, checked as one of the set's generations
// (checkLogin) when check.
func (b *pgBackend) identity(s engine.Secrets, which string, check bool) (string, string, error) {
	user, pw := s[pgUserKey], s[pgPasswordKey]
	if user == "" || pw == "" {
		return "", "", fmt.Errorf("the %s secrets lack a %s or a %s", which, pgUserKey, pgPasswordKey)
	}
	if check {
		return user, pw, b.checkLogin(user)
	}
	return user, pw, nil
}

func (b *pgBackend) checkLogin(user string) error {
	if _, ok := pgGeneration(user); ok {
		return nil
	}
	return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: fmt.Sprintf(
		"the source Secret names role %q under %s, which is not one of this set's login roles (%s_g<N>), so rekey changes nothing: restore the source Secret, or delete it to provision afresh", user, pgUserKey, pgBase)}
}

func (b *pgBackend) requireGroup(primary *Instance, r reason.Reason) error {
	if primary.acct(pgGroup).Exists {
		return nil
	}
	return &engine.Refusal{Reason: string(r), Message: fmt.Sprintf(
		"role %s (a login's group in spec.postgres) does not exist on %s: create it (CREATE ROLE %s NOLOGIN) and give it the application's objects and grants, then rekey goes on", pgGroup, pgPrimary, pgGroup)}
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
	if r := b.w.instance(pgReplica); r.Stopped {
		return &engine.UnreachableError{Instance: pgReplica, Err: fmt.Errorf("has not replayed the primary's WAL within 1m0s (replication stopped or lagging): no password is given out until it has")}
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

// apply is ensureLogin, the replay wait, and the proof everywhere.
func (b *pgBackend) apply(primary *Instance, user, pw string) error {
	if err := b.ensureLogin(primary, user, pw); err != nil {
		return err
	}
	if err := b.waitReplay(); err != nil {
		return err
	}
	return b.proven(user, pw, reason.BackendError, "rekey just set it, so something else decides logins: check pg_hba.conf (scram-sha-256 or md5 for these roles) and that hosts lists one cluster")
}

// sessions: the consumer's pod is logged in as the role it holds, while
// that role exists.
func (b *pgBackend) sessions(primary *Instance, name string) bool {
	return !b.w.WebGone && b.w.Pod.Creds[pgUserKey] == name && primary.acct(name).Exists
}

// dropLogin drops the role once no session uses it.
func (b *pgBackend) dropLogin(primary *Instance, name string, why reason.Reason) error {
	if b.sessions(primary, name) {
		return &engine.Refusal{Reason: string(why), Message: fmt.Sprintf(
			"role %s still has 1 session(s): %s pid 100 (web from 10.0.0.9). rekey drops it only once they end, so that no client is cut off: restart the clients that still log in as %s (they are not among this set's consumers), or end the sessions with pg_terminate_backend; rekey retries by itself", name, pgPrimary, name)}
	}
	delete(primary.Users, name)
	pgSync(b.w)
	failpoint.Hit("postgres/login-dropped")
	return nil
}

// generations are the primary's roles that are the set's: marked
// <base>_g<N>.
func (b *pgBackend) generations(primary *Instance) []string {
	var names []string
	for name, a := range primary.Users {
		if _, ok := pgGeneration(name); ok && a.Exists && a.Marked {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func (b *pgBackend) removeGenerations(primary *Instance, why reason.Reason, keep ...string) error {
	for _, g := range b.generations(primary) {
		if slices.Contains(keep, g) {
			continue
		}
		if err := b.dropLogin(primary, g, why); err != nil {
			return err
		}
	}
	return nil
}
