package explorer

import (
	"context"
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// The PostgreSQL world (option Postgres): a primary, pg0, and a streaming
// replica, pg1, whose roles are the instances' accounts, keyed by role
// name (a password each, Marked when its comment carries the set's owner
// mark), and the group role app_owner the logins join. The decisions are
// the PostgreSQL backend's (internal/backend/postgres rotation.go,
// generations.go, roles.go, adopt.go, conn.go), carried out on that model;
// each is proven on a real primary and replica by a test named here:
//
//   - a login role per generation, <base>_g<N> (an underscore), made on
//     the primary beside the current one, a member of the group and marked
//     for the set; the old one dropped only by Retire, once the new one
//     logs in on every instance; a repeated Retire finds it gone
//     (TestOverlappingRotation; e2e TestPostgresRotation);
//   - every statement on the primary alone, the replica holding what it
//     replayed; no password proven or handed out before every replica has
//     replayed the change (Apply stops Unreachable naming the replica
//     while it does not replay: TestReplicaGate, which also shows a
//     paused replica does not know the new role; Reset's repair too:
//     TestModelDropsAwaitReplay); a drop and a release wait too, and a
//     paused replica still lets a dropped role in until it replays
//     (TestModelDropsAwaitReplay, TestModelFailover);
//   - every instance must answer, or nothing is done (Unreachable naming
//     it: TestTopologyRefusals);
//   - Precheck refuses a generation of the set other than the current one
//     (DualPasswordExists, naming recover: TestSeveralLogins, e2e
//     TestPostgresRestoredGeneration), a missing current role
//     (RotateRefused) and a current role that does not log in with the
//     source Secret's password (KeyMismatch: TestModelPrecheckRefusals);
//   - Apply sweeps the generations of interrupted rotations
//     (TestModelApplySweeps); Reset sets the current login's password
//     again (creating it if it is missing) and drops every other
//     generation (TestSeveralLogins, TestReplicaGate,
//     TestModelResetRecreates);
//   - a role is dropped only once no session uses it, refused with the
//     caller's reason otherwise (Retire: DiscardRefused,
//     TestOverlappingRotation; Release: UsersInUse, TestRelease; Apply's
//     sweep: RotateRefused, TestModelApplySweeps); the consumer's pod has
//     a session as the role it holds while that role exists;
//   - a role without the set's mark is never changed or dropped (NotOwned:
//     TestOverlappingRotation); the Verify refusal (PendingRejected:
//     TestOverlappingRotation);
//   - Release (deletionPolicy Discard) drops every other generation and
//     takes the mark off the current login, which keeps its password; it
//     refuses without a current login (KeyMismatch: TestRelease);
//     Deprovision (Delete) drops every generation (TestOverlappingRotation,
//     TestSeveralLogins; e2e TestPostgresRotation);
//   - several logins (spec.postgres.logins, option Logins: pglogins.go):
//     each its own generation roles, group and Secret keys; every step
//     goes login by login in the spec's order (made, proven, swept,
//     dropped, released), so that a crash or a refusal between two logins
//     leaves the first done (TestSeveralLogins; TestModelLoginsOneByOne: a
//     session of the second login's old role leaves the first's dropped,
//     DiscardRefused, and Release takes the mark off each);
//   - terminateSessions (option TerminateSessions): every drop (Retire,
//     Apply's sweep, Reset, Release, Deprovision) first makes the role
//     NOLOGIN on the primary, waits for the replica to replay that (a
//     paused replica stops it there, Unreachable, the role NOLOGIN on the
//     primary and still logging in on the replica, its sessions still
//     running), then ends its sessions on every instance and drops it
//     instead of refusing (TestTerminateSessions;
//     TestModelTerminateAwaitsReplay, also Deprovision's drop of a
//     current login in use). A client outside the set's consumers may
//     hold a session as the served login (pgclient.go): without the
//     option it holds the drop back, with the refusal's reason, until it
//     ends (TestOverlappingRotation, TestModelApplySweeps, TestRelease);
//   - an adopted role (spec.postgres.adopt, option Adopt: pgadopt.go),
//     legacy, proven with its password before anything is stored, claimed
//     at provisioning (marked, its password kept) as generation 1 and
//     distributed (TestAdoption, TestSeveralLoginsAdoption with Logins:
//     the second login adopts it); dropped by the first rotation's Retire
//     (TestAdoption); while it is current, Precheck refuses another
//     generation, a reset sets its password again and drops the rest,
//     and Release and Deprovision hand it back without the set's mark,
//     with its password (TestModelAdoptedCurrent);
//   - a person's change of a role's password (option HandChanges:
//     pghand.go, TestModelHandChange);
//   - the primary not answering, and a failover (option Failover:
//     pgfailover.go, TestModelFailover).
//
// Crashes: after each role created, changed, adopted or dropped (the
// backend's own failpoints postgres/login-ensured, postgres/login-dropped,
// reset/postgres-login-ensured, where e2e TestPostgresCrashSafety kills
// the manager, and postgres/adopted-marked), and after Release's
// mark removal (the model's). Adoption happens while the set provisions,
// which Start does before exploring: its crash point is not explored.
// Not modelled: the leadership term on the roles' comment, a group role
// missing.
const (
	// PostgresWorld is the model annotation's value that selects it.
	PostgresWorld = "postgres"
	// The source Secret's keys, as the PostgreSQL backend's.
	pgUserKey     = "username"
	pgPasswordKey = "password"
	pgPrimary     = "pg0"
	pgReplica     = "pg1"
	pgBase        = "app"
	pgGroup       = "app_owner"
)

func (w *World) postgres() bool { return w.Set.Annotations[Annotation] == PostgresWorld }

// pgGeneration is N of a role named <base>_g<N> of either login's base.
func pgGeneration(role string) (int64, bool) {
	if n, ok := pgGenerationOf(pgBase, role); ok {
		return n, ok
	}
	return pgGenerationOf(pgRepBase, role)
}

type pgBackend struct {
	w  *World
	cs *v1.CredentialSet
}

var (
	_ engine.Backend           = (*pgBackend)(nil)
	_ engine.Releaser          = (*pgBackend)(nil)
	_ engine.Deprovisioner     = (*pgBackend)(nil)
	_ engine.TransportReporter = (*pgBackend)(nil)
)

func init() {
	pgRegister()
	for _, p := range []string{"postgres/login-ensured", "postgres/login-dropped", "reset/postgres-login-ensured", "release/postgres-login-released", "postgres/adopted-marked"} {
		crashPoints[p] = true
	}
}

func (b *pgBackend) Keys() []string { return pgKeys(b.cs) }

func (b *pgBackend) Traits() engine.Traits { return engine.Traits{Overlap: true} }

func (b *pgBackend) InsecureTransport() string { return "" } // tls VerifyFull, the default

// NewSecrets: each login's generation role; a password named after the
// rotation (deterministic, so that equal histories give equal states) and
// the login.
func (b *pgBackend) NewSecrets(gen int64) (engine.Secrets, error) {
	id := b.cs.Status.RotationID
	if id == "" {
		id = fmt.Sprintf("g%d", gen)
	}
	s := engine.Secrets{}
	for _, l := range b.logins() {
		s[l.userKey()], s[l.passwordKey()] = fmt.Sprintf("%s_g%d", l.base, gen), l.pw+id
	}
	return s, nil
}

func (b *pgBackend) Render(s engine.Secrets) (map[string][]byte, error) {
	ids, err := b.identities(s, "distributed", false)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for k, v := range pgSecretsOf(ids) {
		out[k] = []byte(v)
	}
	return out, nil
}

func (b *pgBackend) Version(context.Context, engine.Secrets) (string, error) {
	if _, err := b.topology(); err != nil {
		return "", err
	}
	return "16.4", nil
}

// Precheck: each current login exists, is the set's, is its login's only
// generation, and logs in everywhere.
func (b *pgBackend) Precheck(_ context.Context, cur engine.Secrets) error {
	ids, err := b.identities(cur, "current", true)
	if err != nil {
		return err
	}
	primary, err := b.topology()
	if err != nil {
		return err
	}
	if err := b.requireGroups(primary, ids, reason.RotateRefused); err != nil {
		return err
	}
	for _, id := range ids {
		a := primary.acct(id.user)
		if !a.Exists {
			return &engine.Refusal{Reason: string(reason.RotateRefused), Message: fmt.Sprintf(
				"role %s, a current login in the source Secret, does not exist on %s, so the rotation did not start: kubectl rekey recover recreates it with the source Secret's password; then rotate again", id.user, primary.Name)}
		}
		if !a.Marked {
			return b.notOwned(id.user, "start a rotation that would drop")
		}
		for _, g := range b.generations(primary, id.base) {
			if g != id.user {
				return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: fmt.Sprintf(
					"role %s already has a login on %s beside the current login %s: a generation of this set that the status does not account for (was the status or the source Secret restored from a backup?), which consumers may log in as, so nothing was changed: reset the server to the source Secret (kubectl rekey recover does this, once the consumers run the current logins), then rotate again", g, primary.Name, id.user)}
			}
		}
		if err := b.proven(id.user, id.pw, reason.KeyMismatch, "it was changed outside rekey, so the rotation did not start: once no consumer depends on the server's password, kubectl rekey recover resets it to the source Secret's; then rotate again"); err != nil {
			return err
		}
	}
	return nil
}

// Apply makes the pending logins beside the current ones, then drops the
// generations of interrupted rotations, login by login.
func (b *pgBackend) Apply(_ context.Context, cur, pending engine.Secrets, _ int64) (engine.Secrets, error) {
	ids, err := b.identities(pending, "pending", true)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if id.user == cur[id.userKey()] {
			return nil, b.sameLogin(reason.RotateRefused, id.user)
		}
	}
	primary, err := b.topology()
	if err != nil {
		return nil, err
	}
	if err := b.requireGroups(primary, ids, reason.RotateRefused); err != nil {
		return nil, err
	}
	if err := b.apply(primary, ids); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := b.removeGenerations(primary, id.base, reason.RotateRefused, cur[id.userKey()], id.user); err != nil {
			return nil, err
		}
	}
	return pgSecretsOf(ids), nil
}

func (b *pgBackend) sameLogin(r reason.Reason, user string) error {
	return &engine.Refusal{Reason: string(r), Message: fmt.Sprintf(
		"the pending login %s is also the current login, so retiring one would drop the other: abort the rotation (kubectl rekey abort) and rotate again", user)}
}

// Retire drops the current logins once every pending one logs in
// everywhere, login by login.
func (b *pgBackend) Retire(_ context.Context, cur, pending engine.Secrets) error {
	ids, err := b.identities(pending, "pending", false)
	if err != nil {
		return err
	}
	for _, id := range ids {
		old := cur[id.userKey()]
		if old == "" {
			return fmt.Errorf("the current secrets lack a %s", id.userKey())
		}
		if old == id.user {
			return b.sameLogin(reason.DiscardRefused, id.user)
		}
		if err := b.checkLogin(id.pgLogin, old); err != nil {
			return err
		}
	}
	primary, err := b.topology()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := b.proven(id.user, id.pw, reason.PendingRejected, "so "+cur[id.userKey()]+" was not dropped (its consumers could be locked out). The discard began and can only complete: set "+id.user+"'s password back to the source Secret's "+engine.PendingKey(id.passwordKey())+" (ALTER ROLE ... PASSWORD, on the primary), then rekey finishes it"); err != nil {
			return err
		}
	}
	for _, id := range ids {
		old := cur[id.userKey()]
		a := primary.acct(old)
		if !a.Exists {
			continue // gone already: a Retire after a crash
		}
		if !a.Marked {
			return b.notOwned(old, "drop")
		}
		if err := b.dropLogin(primary, old, reason.DiscardRefused); err != nil {
			return err
		}
	}
	return nil
}

// Reset repairs the current logins first, then drops every other
// generation of each.
func (b *pgBackend) Reset(_ context.Context, cur engine.Secrets) error {
	ids, err := b.identities(cur, "current", true)
	if err != nil {
		return err
	}
	primary, err := b.topology()
	if err != nil {
		return err
	}
	if err := b.requireGroups(primary, ids, reason.BackendError); err != nil {
		return err
	}
	if err := b.apply(primary, ids); err != nil {
		return err
	}
	failpoint.Hit("reset/postgres-login-ensured")
	for _, id := range ids {
		if err := b.removeGenerations(primary, id.base, reason.AbortSkipped, id.user); err != nil {
			return err
		}
	}
	return nil
}

// Verify: every login logs in everywhere with the password s holds.
func (b *pgBackend) Verify(_ context.Context, s engine.Secrets) error {
	ids, err := b.identities(s, "distributed", false)
	if err != nil {
		return err
	}
	if _, err := b.topology(); err != nil {
		return err
	}
	for _, id := range ids {
		if err := b.proven(id.user, id.pw, reason.PendingRejected, "so the distribution Secrets were not changed (consumers keep what works): the source Secret or the role was changed outside rekey; run kubectl rekey recover"); err != nil {
			return err
		}
	}
	return nil
}
