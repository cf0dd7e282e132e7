package explorer

import (
	"context"
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// The PostgreSQL model's provisioning, adoption and deletion (the
// backend's rotation.go Provision, Release and Deprovision, adopt.go, and
// postgreskube's build).

// pgRegister registers the model as registerWorld does, with what
// postgreskube's build adds: before the set provisions, each login's role
// to adopt is proven with the password its passwordSecretRef holds
// (pgAdoptedPassword), and handed to provisioning (Plan.Adopt).
func pgRegister() {
	registry.Register(registry.Entry{
		Kind:    "explorer-" + PostgresWorld,
		Field:   "the " + Annotation + " annotation (" + PostgresWorld + ")",
		Selects: func(cs *v1.CredentialSet) bool { return cs.Annotations[Annotation] == PostgresWorld },
		Build: func(_ context.Context, cs *v1.CredentialSet, _ registry.Kube, _ registry.Options) (*registry.Plan, error) {
			b := &pgBackend{w: active, cs: cs}
			p := &registry.Plan{Backend: b}
			if cs.Status.KeyGeneration != 0 || !cs.DeletionTimestamp.IsZero() {
				return p, nil
			}
			for _, l := range b.logins() {
				if l.adopt == "" {
					continue
				}
				primary, err := b.topology()
				if err != nil {
					return nil, err
				}
				if err := b.prove(primary, l, pgAdoptedPassword); err != nil {
					return nil, err
				}
				if p.Adopt == nil {
					p.Adopt = engine.Secrets{}
				}
				p.Adopt[l.userKey()], p.Adopt[l.passwordKey()] = l.adopt, pgAdoptedPassword
			}
			return p, nil
		},
		LockKeys: func(*v1.CredentialSet) []string { return []string{"explorer:" + PostgresWorld} },
	})
}

// prove is the backend's: the role to adopt exists, carries no other
// owner's mark, and logs in on the primary with pw (the model's marks are
// this set's: an unmarked role is anybody's).
func (b *pgBackend) prove(primary *Instance, l pgLogin, pw string) error {
	a := primary.acct(l.adopt)
	if !a.Exists {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
			"role %s named in spec.postgres.adopt.role does not exist on %s, so nothing was adopted or changed: name the role applications log in as today, or remove spec.postgres.adopt to start with a new login %s_g1", l.adopt, primary.Name, l.base)}
	}
	if !a.Accepts(pw) {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
			"the password in the Secret named in spec.postgres.adopt.passwordSecretRef does not log in as role %s on %s, so rekey did not adopt it and changed nothing: put the password applications log in with today under that key (rekey adopts only a role whose password it is given, as proof that the role is yours to retire)", l.adopt, primary.Name)}
	}
	return nil
}

// Provision claims each adopted role (proven, marked for the set, a member
// of the group, its password kept), makes the other logins' first
// generation, waits for the replay (also when it made none) and proves
// every login everywhere.
func (b *pgBackend) Provision(_ context.Context, cur engine.Secrets) (engine.Provisioned, error) {
	ids, err := b.identities(cur, "current", true)
	if err != nil {
		return engine.Provisioned{}, err
	}
	primary, err := b.topology()
	if err != nil {
		return engine.Provisioned{}, err
	}
	if err := b.requireGroups(primary, ids, reason.ProvisionFailed); err != nil {
		return engine.Provisioned{}, err
	}
	var made []pgIdentity
	adopted := false
	for _, id := range ids {
		if !id.adopted(id.user) {
			made = append(made, id)
			continue
		}
		adopted = true
		if err := b.prove(primary, id.pgLogin, id.pw); err != nil {
			return engine.Provisioned{}, err
		}
		a := primary.acct(id.user)
		a.Marked = true
		primary.set(id.user, a)
		pgSync(b.w)
		failpoint.Hit("postgres/adopted-marked")
	}
	if err := b.apply(primary, made); err != nil {
		return engine.Provisioned{}, err
	}
	for _, id := range ids {
		if id.adopted(id.user) {
			if err := b.proven(id.user, id.pw, reason.ProvisionFailed, "check pg_hba.conf on that instance"); err != nil {
				return engine.Provisioned{}, err
			}
		}
	}
	gen := int64(1)
	for _, id := range made {
		g, _ := pgGenerationOf(id.base, id.user)
		gen = max(gen, g)
	}
	return engine.Provisioned{Secrets: pgSecretsOf(ids), Generation: gen, Adopted: adopted}, nil
}

// Deprovision drops every generation the set made, login by login, and
// hands a current adopted role back without the set's mark (it existed
// before rekey).
func (b *pgBackend) Deprovision(_ context.Context, cur engine.Secrets) error {
	primary, err := b.topology()
	if err != nil {
		return err
	}
	for _, l := range b.logins() {
		if err := b.removeGenerations(primary, l.base, reason.UsersInUse); err != nil {
			return err
		}
		if user := cur[l.userKey()]; l.adopted(user) {
			if err := b.release(primary, user); err != nil {
				return err
			}
		}
	}
	return nil
}

// Release drops every other generation of each login, then takes the
// set's mark off its current login, which keeps its password.
func (b *pgBackend) Release(_ context.Context, cur engine.Secrets) error {
	for _, l := range b.logins() {
		if cur[l.userKey()] == "" {
			return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: fmt.Sprintf(
				"the source Secret names no current login (%s is empty), so rekey cannot tell which role consumers log in as and dropped none: restore the source Secret, or choose deletionPolicy Retain and drop the set's roles by hand", l.userKey())}
		}
	}
	primary, err := b.topology()
	if err != nil {
		return err
	}
	for _, l := range b.logins() {
		user := cur[l.userKey()]
		if err := b.removeGenerations(primary, l.base, reason.UsersInUse, user); err != nil {
			return err
		}
		if err := b.release(primary, user); err != nil {
			return err
		}
	}
	return nil
}

// release takes the set's mark off a role, which keeps its password; the
// replay waited for, as a drop's.
func (b *pgBackend) release(primary *Instance, user string) error {
	if a := primary.acct(user); a.Exists && a.Marked {
		a.Marked = false
		primary.set(user, a)
		pgSync(b.w)
		if err := b.waitReplay(); err != nil {
			return err
		}
		failpoint.Hit("release/postgres-login-released")
	}
	return nil
}
