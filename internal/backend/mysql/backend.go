// Package mysql is rekey's MySQL backend: dual-password rotation (RETAIN
// CURRENT PASSWORD, then DISCARD OLD PASSWORD) applied on every instance of
// a cluster with sql_log_bin=0, the instance's role (primary, replica,
// super_read_only) read live.
package mysql

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// Backend rotates the passwords of a fixed list of users on a list of
// instances. It keeps no state between calls: MySQL is asked every time.
type Backend struct {
	Instances []Instance
	Users     []User
	AdminUser string
	// AdminKey is the admin's source Secret key when the admin is one of
	// the rotated users; then its password follows the rotation.
	AdminKey string
	// AdminPassword is the admin's fixed password when it is not rotated.
	AdminPassword string
	// adminRef is where AdminPassword comes from (nil when the spec gives
	// none), named when MySQL refuses it.
	adminRef *v1.SecretKeyRef
	// caRef is spec.mysql.tlsCASecretRef (nil when unset), named by a
	// check that finds a certificate untrusted.
	caRef *v1.SecretKeyRef
	// transport protects every connection: verified TLS unless the spec
	// explicitly opts out.
	transport transport
	// Concurrency bounds how many instances are worked on at once; 1 is
	// one instance after another, the most cautious.
	Concurrency int
	// Gate, when set, is asked before a rotation or a discard starts, after
	// the instances' own health: an operator that manages the cluster
	// (MOCO) may know it unfit while every instance still answers. It
	// refuses with a *engine.Refusal; discard says which phase starts.
	Gate func(ctx context.Context, discard bool) error
	// Fence, when set, is asked right before each instance's session that
	// changes accounts, and refuses once this manager is no longer the
	// leader: a pause between two instances cannot let a stale manager go
	// on to the next.
	Fence func(ctx context.Context) error
	// Term is this manager's leadership term (0: none): every session that
	// changes accounts records it on the set's users and refuses to go on
	// where a higher one is recorded (fence.go).
	Term int64
	// owner is the set's UID the users rekey creates are marked with, and
	// adopted the keys whose users are never marked (SetOwner, owner.go).
	owner   string
	adopted map[string]bool
	// Gen is the set's current generation (status.keyGeneration, or the
	// one provisioning mints) and Target the one its rotation produces:
	// what the users are marked with (generation.go). 0: unknown, nothing
	// marked and nothing taken for stale.
	Gen, Target int64
}

var _ engine.Backend = (*Backend)(nil)

// New builds the backend for a spec. adminPassword is the value of
// admin.passwordSecretRef ("" when unset), caPEM that of tlsCASecretRef
// (nil when unset: the system roots verify). Everything in the spec that
// reaches SQL, the driver or TLS is re-checked here, whatever admission
// let through.
func New(spec *v1.MySQLSpec, instances []Instance, adminPassword string, caPEM []byte) (*Backend, error) {
	users, err := ResolveUsers(spec)
	if err != nil {
		return nil, err
	}
	if !namePattern.MatchString(spec.Admin.User) {
		// Also a DSN safety net: a ':' or '@' would split the DSN.
		return nil, fmt.Errorf("admin user %q is not a valid MySQL user name (letters, digits, _, - and ., at most 32)", spec.Admin.User)
	}
	for _, inst := range instances {
		if err := validateInstance(inst); err != nil {
			return nil, err
		}
	}
	t, err := newTransport(spec, caPEM)
	if err != nil {
		return nil, err
	}
	b := &Backend{Instances: instances, Users: users, AdminUser: spec.Admin.User,
		AdminPassword: adminPassword, transport: t, AdminKey: adminKey(spec.Admin.User, users),
		adminRef: spec.Admin.PasswordSecretRef, caRef: spec.TLSCASecretRef}
	if b.AdminKey == "" && adminPassword == "" {
		return nil, fmt.Errorf("admin user %s is not rotated by this set, so mysql.admin.passwordSecretRef must give its password", spec.Admin.User)
	}
	return b, nil
}

// adminKey is the admin's source Secret key if the admin is rotated: an
// account of that name open to any host (rekey connects from anywhere).
func adminKey(admin string, users []User) string {
	for _, u := range users {
		if u.Name == admin && u.Host == "%" {
			return u.Key
		}
	}
	return ""
}

// AdminIsRotated reports whether the spec's admin is one of its users.
func AdminIsRotated(spec *v1.MySQLSpec) (bool, error) {
	users, err := ResolveUsers(spec)
	if err != nil {
		return false, err
	}
	return adminKey(spec.Admin.User, users) != "", nil
}

// Keys implements engine.Backend.
func (b *Backend) Keys() []string {
	keys := make([]string, len(b.Users))
	for i, u := range b.Users {
		keys[i] = u.Key
	}
	return keys
}

// Traits implements engine.Backend: rekey mints passwords and stores them
// first (MySQL keeps only a hash); dual passwords overlap until DISCARD.
func (b *Backend) Traits() engine.Traits { return engine.Traits{Overlap: true, AddsAtRest: true} }

// NewSecrets implements engine.Backend: each user's password has the
// length decided for it (passwordLength); user names do not change with
// the generation.
func (b *Backend) NewSecrets(int64) (engine.Secrets, error) {
	return engine.NewPasswords(passwordLengths(b.Users))
}

// Render implements engine.Backend: consumers read each password under its
// source Secret key.
func (b *Backend) Render(s engine.Secrets) (map[string][]byte, error) {
	out := make(map[string][]byte, len(s))
	for k, v := range s {
		out[k] = []byte(v)
	}
	return out, nil
}

// adminPasswords lists the admin passwords to try, in order.
func (b *Backend) adminPasswords(first, then engine.Secrets) []string {
	if b.AdminKey == "" {
		return []string{b.AdminPassword}
	}
	return []string{first[b.AdminKey], then[b.AdminKey]}
}

// eachInstance runs fn in a session prepared for credential DDL (see
// forEachInstance).
func (b *Backend) eachInstance(ctx context.Context, step string, passwords []string, secrets engine.Secrets, fn func(*session) error) error {
	return b.forEachInstance(ctx, step, true, passwords, secrets, fn)
}

// forEachInstance runs fn in a prepared session on every instance, at most
// Concurrency at a time (1: one after another, in order); lift says whether
// the sessions run credential DDL. Instances are independent: one failing
// does not interrupt the others mid-statement, which could leave
// super_read_only lifted; the first error is returned.
func (b *Backend) forEachInstance(ctx context.Context, step string, lift bool, passwords []string, secrets engine.Secrets, fn func(*session) error) error {
	if len(b.Instances) == 0 {
		return &engine.Refusal{Reason: string(reason.RotateRefused), Message: "no instances: scale the cluster up"}
	}
	phase, _, _ := strings.Cut(step, "/")
	var g errgroup.Group
	g.SetLimit(max(b.Concurrency, 1))
	for _, inst := range b.Instances {
		g.Go(func() error {
			if lift && b.Fence != nil {
				// Cheap, and spares the instance a session; the check
				// that counts is the one under the set's lock (fence.go).
				if err := b.Fence(ctx); err != nil {
					return &fencedError{err}
				}
			}
			s, err := openSession(ctx, phase, lift, b.fencing(), inst, b.transport, b.AdminUser, passwords...)
			if err != nil {
				return b.adminLoginError(err)
			}
			b.bind(s, secrets)
			err = fn(s)
			if cerr := s.close(ctx); err == nil {
				err = cerr
			}
			if err == nil {
				failpoint.Hit(step)
			}
			return err
		})
	}
	return safe(g.Wait())
}

// Provision implements engine.Backend: create missing users with their
// grants on every instance; an existing user must already accept cur.
func (b *Backend) Provision(ctx context.Context, cur engine.Secrets) (engine.Provisioned, error) {
	return engine.Provisioned{Secrets: cur}, b.eachInstance(ctx, "provision/instance-done", b.adminPasswords(cur, nil), cur, func(s *session) error {
		if err := s.checkVersion(ctx); err != nil {
			return err
		}
		accts, err := s.ensureUsers(ctx, b.Users, cur)
		if err != nil {
			return err
		}
		var logins []login
		for _, u := range b.Users {
			if of(accts, u).exists && u.loginCheckable() {
				logins = append(logins, login{u, cur[u.Key]})
			}
		}
		// Not writable while rekey logs in (see session.write).
		if err := s.settle(ctx); err != nil {
			return err
		}
		failpoint.Hit(s.step + "/logging-in")
		errs := b.loginAll(ctx, s.inst, logins)
		if refused := refusedKeys(logins, errs); len(refused) > 0 {
			return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
				"%s refuses the password rekey holds for each of these existing users: %s. Put each one's password in the adoptSecretRef Secret under its key and delete that key from the source Secret (or drop the user), and rekey adopts it", s.inst.Name, strings.Join(refused, ", "))}
		}
		if _, other := refusedOrNot(logins, errs, ""); other != nil {
			return other // says nothing about the passwords
		}
		// Adopted users are marked as the generation provisioned, so that
		// an instance that leaves and returns after a rotation is known
		// stale (generation.go).
		var unmarked []User
		for _, u := range b.Users {
			if a := of(accts, u); a.exists && !a.dual && a.mark == nil {
				unmarked = append(unmarked, u)
			}
		}
		return s.markUsers(ctx, unmarked, s.gen)
	})
}

// refusedKeys names each user MySQL refused, with its source Secret key:
// "user app@% (key APP_PASSWORD)".
func refusedKeys(logins []login, errs []error) []string {
	var out []string
	for i, err := range errs {
		if isLoginRefused(err) {
			out = append(out, fmt.Sprintf("user %s (key %s)", logins[i].u, logins[i].u.Key))
		}
	}
	return out
}

// Precheck implements engine.Backend. A rotation starts only on a healthy
// cluster (the health gate, health.go) and only when no user has a dual
// password: one that exists before rotation starts is indistinguishable
// from one rekey set, and would make RETAIN be skipped. A missing user has none: Apply creates it. Nothing here
// writes, so super_read_only is left alone. Nor does it start when a new
// password would be too long for a user an instance lets replicas use.
func (b *Backend) Precheck(ctx context.Context, cur engine.Secrets) error {
	var (
		mu      sync.Mutex
		found   []string
		granted = map[string][]string{} // user → instances granting it REPLICATION SLAVE
	)
	obs, err := b.observeAll(ctx, "precheck/instance-done", b.adminPasswords(cur, nil), cur, func(s *session) error {
		if err := s.checkVersion(ctx); err != nil {
			return err
		}
		accts, err := s.accounts(ctx, b.Users)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, u := range b.Users {
			if of(accts, u).dual {
				found = append(found, u.String()+" on "+s.inst.Name)
			}
			if of(accts, u).replication {
				granted[u.String()] = append(granted[u.String()], s.inst.Name)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := b.rereadPrimary(ctx, obs, b.adminPasswords(cur, nil), cur); err != nil {
		return err
	}
	if rf := decideHealth(rotationPhase, obs); rf != nil {
		return redactRefusal(rf, b.adminPasswords(cur, nil), cur)
	}
	if b.Gate != nil {
		if err := b.Gate(ctx, false); err != nil {
			return err
		}
	}
	if len(found) > 0 {
		sort.Strings(found)
		return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: fmt.Sprintf(
			"%s already has a secondary password, which rekey did not set and cannot tell from its own; the rotation did not start. Reset it to the source Secret's current password with ALTER USER ... IDENTIFIED BY then ALTER USER ... DISCARD OLD PASSWORD (kubectl rekey recover does this), then rotate again",
			strings.Join(found, ", "))}
	}
	if rf := replicationRefusal(tooLongForReplication(b.Users, granted, obs)); rf != nil {
		return rf
	}
	return nil
}

// Apply implements engine.Backend (phase 1's change to MySQL): on every
// instance, RETAIN CURRENT PASSWORD for each user that has no secondary yet.
// A second RETAIN would evict the original password, so MySQL is asked
// first, every time. A user missing on an instance (re-initialised) is
// created there accepting cur, then gets pending retained like the others.
func (b *Backend) Apply(ctx context.Context, cur, pending engine.Secrets, gen int64) (engine.Secrets, error) {
	return pending, b.eachInstance(ctx, "rotate/instance-applied", b.adminPasswords(cur, pending), merge(cur, pending), func(s *session) error {
		accts, err := s.ensureUsers(ctx, b.Users, cur)
		if err != nil {
			return err
		}
		// A user that missed what the set did since (an instance back
		// from a scale-in) holds cur again first: a RETAIN would keep its
		// retired password valid and leave cur refused.
		if reset, err := s.resetStale(ctx, b.Users, accts, cur); err != nil {
			return err
		} else if reset {
			if accts, err = s.accounts(ctx, b.Users); err != nil {
				return err
			}
		}
		var retain []alteration
		for _, u := range b.Users {
			if !of(accts, u).dual {
				retain = append(retain, alteration{u, "IDENTIFIED BY " + quote(pending[u.Key]) + " RETAIN CURRENT PASSWORD"})
			}
		}
		return s.alterAll(ctx, retain, attributeTail(markPatch(gen, true)))
	})
}

// Reset implements engine.Backend. IDENTIFIED BY alone keeps the
// secondary password (verified on MySQL 9.7, whatever older recovery
// procedures claim), so DISCARD OLD PASSWORD follows it. Connecting with
// cur works whether it is the primary or the secondary password. A missing
// user (a re-initialised instance) is created accepting cur.
func (b *Backend) Reset(ctx context.Context, cur engine.Secrets) error {
	for _, u := range b.Users {
		if cur[u.Key] == "" {
			// IDENTIFIED BY '' would leave the user a password nobody holds.
			return fmt.Errorf("mysql: no current password for %s: nothing to reset to", u)
		}
	}
	return b.eachInstance(ctx, "reset/instance-reset", b.adminPasswords(cur, nil), cur, func(s *session) error {
		if _, err := s.ensureUsers(ctx, b.Users, cur); err != nil {
			return err
		}
		var identify, discard []alteration
		for _, u := range b.Users {
			identify = append(identify, alteration{u, "IDENTIFIED BY " + quote(cur[u.Key])})
			discard = append(discard, alteration{u, "DISCARD OLD PASSWORD"})
		}
		// ATTRIBUTE clears a RepairPending swap's mark: after the reset
		// there is nothing left to swap. Two statements, as before for
		// each user: a crash between them leaves cur primary and the
		// secondary it had, which a re-run discards.
		if err := s.alterAll(ctx, identify, attributeTail(createdPatch(), markPatch(s.gen, false))); err != nil {
			return err
		}
		return s.alterAll(ctx, discard, "")
	})
}

// bind gives s what the backend knows beyond the connection: the secrets
// to redact and the owner to mark creations with.
func (b *Backend) bind(s *session, secrets engine.Secrets) {
	s.secrets = append(s.secrets, values(secrets)...)
	s.owner, s.adopted = b.owner, b.adopted
	s.gen, s.target = b.Gen, b.Target
}

// unreachable holds the phase until inst answers. The controller quotes
// Err, so its text is rekey's (redact) from here on.
func unreachable(inst Instance, err error) error {
	return &engine.UnreachableError{Instance: inst.Name, Err: redact(err)}
}
