package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// role is what the primary says of a role.
type role struct {
	exists bool
	mark   string // its comment: rekey's owner mark, or anything else
}

func (b *Backend) lookup(ctx context.Context, s server, name string) (role, error) {
	var r role
	err := s.conn.QueryRow(ctx,
		"SELECT COALESCE(shobj_description(oid, 'pg_authid'), '') FROM pg_roles WHERE rolname = $1", name).Scan(&r.mark)
	if errors.Is(err, pgx.ErrNoRows) {
		return role{}, nil
	}
	if err != nil {
		return role{}, b.fail(s.host, "look up role "+name, err)
	}
	r.exists = true
	return r, nil
}

func (b *Backend) owned(r role) bool {
	mark, _ := parseMark(r.mark)
	return mark == ownerMark(b.owner)
}

func (b *Backend) notOwned(name, what string) error {
	return &engine.Refusal{Reason: string(reason.NotOwned), Message: fmt.Sprintf(
		"role %s exists but rekey did not create it for this CredentialSet (its comment lacks this set's mark), so rekey will not %s it: drop or rename it if nobody uses it, or choose another postgres.login.base", name, what)}
}

// requireGroup refuses to go on without the group role: the generations
// would own what the application creates.
func (b *Backend) requireGroup(ctx context.Context, s server, group string, r reason.Reason) error {
	g, err := b.lookup(ctx, s, group)
	if err != nil || g.exists {
		return err
	}
	return &engine.Refusal{Reason: string(r), Message: fmt.Sprintf(
		"role %s (a login's group in spec.postgres) does not exist on %s: create it (CREATE ROLE %s NOLOGIN) and give it the application's objects and grants, then rekey goes on", group, s.host, ident(group))}
}

// ensureLogin makes login name exist on the primary with password, a
// member of the group and acting as it, in one transaction: a crash leaves
// either nothing or a role carrying this set's mark.
func (b *Backend) ensureLogin(ctx context.Context, s server, group, name, password string) error {
	r, err := b.lookup(ctx, s, name)
	if err != nil {
		return err
	}
	if r.exists && !b.owned(r) {
		return b.notOwned(name, "change")
	}
	var enc string
	if err := s.conn.QueryRow(ctx, "SELECT current_setting('password_encryption')").Scan(&enc); err != nil {
		return b.fail(s.host, "read password_encryption", err)
	}
	v, err := verifier(enc, name, password, nil)
	if err != nil {
		return err
	}
	pw, err := literal(v)
	if err != nil {
		return err
	}
	mark, err := literal(markTerm(b.owner, b.Term))
	if err != nil {
		return err
	}
	id, gid := ident(name), ident(group)
	stmts := []string{}
	if r.exists {
		stmts = append(stmts, "ALTER ROLE "+id+" WITH LOGIN PASSWORD "+pw)
	} else {
		stmts = append(stmts, "CREATE ROLE "+id+" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT PASSWORD "+pw,
			"COMMENT ON ROLE "+id+" IS "+mark)
	}
	// SET role makes every session act as the group from its start, so
	// what the application creates belongs to the group and outlives
	// the generation.
	stmts = append(stmts, "GRANT "+gid+" TO "+id, "ALTER ROLE "+id+" SET role = "+quoteSetting(group))
	what := "create or update role " + name
	err = b.fenced(ctx, s, what, func(tx pgx.Tx) error {
		for _, st := range stmts {
			if _, err := tx.Exec(ctx, st); err != nil {
				return b.fail(s.host, what, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	failpoint.Hit("postgres/login-ensured")
	return nil
}

// quoteSetting is a role name as the value of SET role: a literal (the
// group's name is lower case letters, digits and _, checked in New).
func quoteSetting(group string) string { return "'" + group + "'" }

// waitReplay waits until every replica has replayed the primary's WAL up
// to now: a role change is then visible there, a password may be given to
// consumers that connect to any instance, and a drop or a release is not
// undone by the promotion of a replica.
func (b *Backend) waitReplay(ctx context.Context, t *topology) error {
	if len(t.replicas) == 0 {
		return nil
	}
	var lsn string
	if err := t.primary.conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return b.fail(t.primary.host, "read pg_current_wal_lsn()", err)
	}
	wait := b.ReplayWait
	if wait <= 0 {
		wait = DefaultReplayWait
	}
	for _, r := range t.replicas {
		deadline := time.Now().Add(wait)
		for {
			var done bool
			if err := r.conn.QueryRow(ctx, "SELECT COALESCE(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&done); err != nil {
				return b.fail(r.host, "read pg_last_wal_replay_lsn()", err)
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				return &engine.UnreachableError{Instance: r.host, Err: fmt.Errorf(
					"has not replayed the primary's WAL up to %s within %s (replication stopped or lagging): no password is given out until it has", lsn, wait)}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// provenEverywhere: name logs in with password on every instance.
func (b *Backend) provenEverywhere(ctx context.Context, t *topology, name, password string, why reason.Reason, next string) error {
	for _, s := range t.all() {
		ok, err := b.logsIn(ctx, s.host, name, password)
		if err != nil {
			return err
		}
		if !ok {
			return &engine.Refusal{Reason: string(why), Message: fmt.Sprintf(
				"role %s does not log in on %s with the password the source Secret holds for it: %s", name, s.host, next)}
		}
	}
	return nil
}

// sessions lists, on every instance, the sessions of name: application
// and client address, never what they run.
func (b *Backend) sessions(ctx context.Context, t *topology, name string) ([]string, error) {
	var out []string
	for _, s := range t.all() {
		rows, err := s.conn.Query(ctx, `SELECT COALESCE(NULLIF(application_name, ''), '-'), COALESCE(host(client_addr), 'local'), pid
			FROM pg_stat_activity WHERE usename = $1 ORDER BY pid`, name)
		if err != nil {
			return nil, b.fail(s.host, "list the sessions of "+name, err)
		}
		for rows.Next() {
			var app, addr string
			var pid int32
			if err := rows.Scan(&app, &addr, &pid); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, fmt.Sprintf("%s pid %d (%s from %s)", s.host, pid, printable(app), addr))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, b.fail(s.host, "list the sessions of "+name, err)
		}
	}
	return out, nil
}

// printable keeps an application_name (set by clients) to a short,
// printable form for a message.
func printable(s string) string {
	var sb strings.Builder
	for _, r := range s {
		if sb.Len() >= 40 {
			sb.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f {
			r = '?'
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// dropLogin drops login name once no session uses it. What it owns is
// handed to the group and its grants revoked, database by database (both
// are per database); objects that still depend on it make a refusal that
// names them.
func (b *Backend) dropLogin(ctx context.Context, t *topology, group, name string, why reason.Reason) error {
	if b.terminate {
		if err := b.endSessions(ctx, t, name); err != nil {
			return err
		}
	}
	dbs, err := b.databases(ctx, t.primary)
	if err != nil {
		return err
	}
	// What the role owns is handed over database by database, each in a
	// session of its own, while the fenced transaction holds the set's
	// lock: no stale manager gets to disown a role either. The sessions
	// are looked at once the fence passed, so that a stale manager hears
	// that it is stale, not a refusal that would send a person after a
	// client.
	err = b.fenced(ctx, t.primary, "drop role "+name, func(tx pgx.Tx) error {
		live, err := b.sessions(ctx, t, name)
		if err != nil {
			return err
		}
		if len(live) > 0 {
			return &engine.Refusal{Reason: string(why), Message: fmt.Sprintf(
				"role %s still has %d session(s): %s. rekey drops it only once they end, so that no client is cut off: restart the clients that still log in as %s (they are not among this set's consumers), or end the sessions with pg_terminate_backend; rekey retries by itself",
				name, len(live), strings.Join(live, "; "), name)}
		}
		for _, db := range dbs {
			if err := b.disown(ctx, t.primary.host, db, group, name); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "DROP ROLE IF EXISTS "+ident(name)); err != nil {
			var pg *pgconn.PgError
			if errors.As(err, &pg) && pg.Code == "2BP01" {
				return &engine.Refusal{Reason: string(why), Message: fmt.Sprintf(
					"role %s cannot be dropped, objects still depend on it: %s. Hand them to %s (REASSIGN OWNED BY %s TO %s in their database) and rekey goes on",
					name, printableDetail(pg.Detail), group, ident(name), ident(group))}
			}
			return b.fail(t.primary.host, "drop role "+name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The drop is done only once every replica has it: a replica promoted
	// without it (asynchronous replication, the primary lost) would let
	// the role in again while the set records it gone. Until then the
	// step stops Unreachable and is taken again (DROP ROLE IF EXISTS).
	if err := b.waitReplay(ctx, t); err != nil {
		return err
	}
	failpoint.Hit("postgres/login-dropped")
	return nil
}

// endSessions (spec.postgres.terminateSessions) stops name from logging in
// again, then ends its sessions on every instance: without the first step a
// client could reconnect between the two.
func (b *Backend) endSessions(ctx context.Context, t *topology, name string) error {
	err := b.fenced(ctx, t.primary, "stop "+name+" from logging in", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "ALTER ROLE "+ident(name)+" NOLOGIN"); err != nil {
			return b.fail(t.primary.host, "stop "+name+" from logging in", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := b.waitReplay(ctx, t); err != nil {
		return err
	}
	for _, s := range t.all() {
		if _, err := s.conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name); err != nil {
			return b.fail(s.host, "end the sessions of "+name, err)
		}
	}
	// pg_terminate_backend only signals: wait until the sessions are gone.
	deadline := time.Now().Add(b.timeout())
	for {
		live, err := b.sessions(ctx, t, name)
		if err != nil || len(live) == 0 || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func printableDetail(s string) string {
	s = detailChars.ReplaceAllString(strings.ReplaceAll(s, "\n", "; "), "?")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

// databases are those that accept connections: where a role can own
// something that REASSIGN OWNED must reach.
func (b *Backend) databases(ctx context.Context, s server) ([]string, error) {
	rows, err := s.conn.Query(ctx, "SELECT datname FROM pg_database WHERE datallowconn ORDER BY datname")
	if err != nil {
		return nil, b.fail(s.host, "list the databases", err)
	}
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, b.fail(s.host, "list the databases", err)
	}
	return dbs, nil
}

func (b *Backend) disown(ctx context.Context, host, db, group, name string) error {
	return b.inDatabase(ctx, host, db, group, name, "REASSIGN OWNED BY "+ident(name)+" TO "+ident(group), "DROP OWNED BY "+ident(name))
}

// reassign hands what name owns in db to the group.
func (b *Backend) reassign(ctx context.Context, host, db, group, name string) error {
	return b.inDatabase(ctx, host, db, group, name, "REASSIGN OWNED BY "+ident(name)+" TO "+ident(group))
}

// inDatabase runs statements about role name in database db, in one
// transaction (REASSIGN OWNED and DROP OWNED act on one database). Its
// callers run it inside a fenced transaction on the primary.
func (b *Backend) inDatabase(ctx context.Context, host, db, group, name string, stmts ...string) error {
	c, err := b.connect(ctx, host, b.adminUser, b.adminPassword, db)
	if err != nil {
		return b.fail(host, "connect to database "+db+" to hand over what "+name+" owns", err)
	}
	defer c.Close(ctx)
	err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		for _, st := range stmts {
			if _, err := tx.Exec(ctx, st); err != nil {
				return err
			}
		}
		return nil
	})
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "42704" { // undefined_object: dropped already
		return nil
	}
	if err != nil {
		return b.fail(host, "hand what "+name+" owns in database "+db+" to "+group, err)
	}
	return nil
}
