package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	driver "github.com/go-sql-driver/mysql"
)

// One round trip per instance per phase. A phase reads
// the rows of all its users in one query, then changes them in one
// statement: ALTER USER names several accounts, each with its own clause
// (IDENTIFIED BY … RETAIN CURRENT PASSWORD, DISCARD OLD PASSWORD), so the
// time of a phase no longer grows with users × round trip.
//
// A multi-account ALTER USER is atomic in MySQL 8 (verified on 9.7.4):
// it changes every account it names or, on any error, none. So a crash, a
// lost connection or a kill in the middle leaves every user as the old
// per-user statements could: a RETAIN either ran for it or did not (old
// only, or old and new), a DISCARD either ran or did not. The rules stay
// where they were:
//
//   - sql_log_bin=0 is the session's first statement (session.prepare);
//   - only users that mysql.user says have no secondary, read in the
//     same session just before, are named in a RETAIN: never a second one;
//   - when MySQL refuses the statement, nothing changed; every user is
//     then altered on its own, so that each one that fails is reported
//     by name with MySQL's reason (and no password: errors are redacted),
//     and the users that can be changed are, as before.

// accountKey names a user in what accounts returns. mysql.user's Host
// column compares case-insensitively.
func accountKey(name, host string) string { return name + "@" + strings.ToLower(host) }

// accounts reads the rows of users in one query: what account reads for
// one user, for all of them. Missing users are absent from the map (the
// zero account: exists false). Names and hosts are validated and quoted
// (the session runs with sql_mode=” so backslash escapes hold), and the
// query goes over the text protocol: one round trip, no prepared
// statement.
func (s *session) accounts(ctx context.Context, users []User) (map[string]account, error) {
	out := make(map[string]account, len(users))
	if len(users) == 0 {
		return out, nil
	}
	rows, err := s.conn.QueryContext(ctx,
		"SELECT User, Host, JSON_CONTAINS_PATH(COALESCE(User_attributes, '{}'), 'one', '$.additional_password'), "+
			"JSON_UNQUOTE(JSON_EXTRACT(COALESCE(User_attributes, '{}'), '$.metadata.rekey')), "+
			"JSON_UNQUOTE(JSON_EXTRACT(COALESCE(User_attributes, '{}'), "+ownerPath+")), "+
			"JSON_EXTRACT(COALESCE(User_attributes, '{}'), "+appliedPath+"), Repl_slave_priv FROM mysql.user WHERE (User, Host) IN ("+accountList(users)+")")
	if err != nil {
		return nil, s.wrap("read mysql.user", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, host string
		var dual sql.NullInt64
		var mark, owner, applied, repl sql.NullString
		if err := rows.Scan(&name, &host, &dual, &mark, &owner, &applied, &repl); err != nil {
			return nil, s.wrap("read mysql.user", err)
		}
		out[accountKey(name, host)] = account{exists: true, dual: dual.Int64 == 1, creating: mark.String == "creating", swapping: mark.String == "swapping", owner: owner.String, replication: repl.String == "Y", mark: parseMark(applied.String)}
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("read mysql.user", err)
	}
	return out, nil
}

// of is u's account in what accounts returned.
func of(accts map[string]account, u User) account { return accts[accountKey(u.Name, u.Host)] }

// ensureUsers reads the rows of users and (re)creates, accepting
// passwords[u.Key], every user that is missing or whose creation was
// interrupted. The accounts returned are as read, before any creation (as
// ensureUser's). Creation is the repair of a re-initialised instance and
// stays one statement at a time, each idempotent (createUser).
func (s *session) ensureUsers(ctx context.Context, users []User, passwords map[string]string) (map[string]account, error) {
	accts, err := s.accounts(ctx, users)
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		if of(accts, u).needsCreate() {
			if err := s.createUser(ctx, u, passwords[u.Key], s.gen); err != nil {
				return nil, err
			}
		}
	}
	return accts, nil
}

// alteration is one account's clause in an ALTER USER.
type alteration struct {
	u      User
	clause string // e.g. "IDENTIFIED BY '…' RETAIN CURRENT PASSWORD", "DISCARD OLD PASSWORD"
}

// alterAll changes every account in one statement,
// ALTER USER a clause, b clause … [tail], tail (an ATTRIBUTE) applying to
// all of them. MySQL applies it atomically; if it refuses it, each
// account is altered alone and every one that fails is reported by name
// (see the top of this file). An error that is not MySQL's answer (the
// connection was lost: the statement ran entirely or not at all) is
// returned as the instance's, for the phase to re-read and re-run.
func (s *session) alterAll(ctx context.Context, alts []alteration, tail string) error {
	if len(alts) == 0 {
		return nil
	}
	if len(alts) == 1 {
		return s.alterEach(ctx, alts, tail)
	}
	var b strings.Builder
	b.WriteString("ALTER USER ")
	for i, a := range alts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.u.Account() + " " + a.clause)
	}
	if tail != "" {
		b.WriteString(" " + tail)
	}
	if err := s.liftForWrite(ctx); err != nil {
		return err
	}
	_, err := s.conn.ExecContext(ctx, b.String())
	var me *driver.MySQLError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &me):
		return s.wrap("ALTER USER", err)
	}
	// Refused as a whole, so nothing changed: one account at a time says
	// which one MySQL refuses, and why.
	return s.alterEach(ctx, alts, tail)
}

// alterEach alters one account per statement, in order, every one of
// them even after a failure (each was decided on its own and is safe on
// its own); the failures are joined, each naming its user.
func (s *session) alterEach(ctx context.Context, alts []alteration, tail string) error {
	if err := s.liftForWrite(ctx); err != nil {
		return err
	}
	var errs []error
	for _, a := range alts {
		stmt := "ALTER USER " + a.u.Account() + " " + a.clause
		if tail != "" {
			stmt += " " + tail
		}
		if _, err := s.conn.ExecContext(ctx, stmt); err != nil {
			werr := s.wrap("ALTER USER "+a.u.Account(), err)
			var me *driver.MySQLError
			if !errors.As(err, &me) {
				return joined(append(errs, werr)) // lost the connection: nothing more runs
			}
			errs = append(errs, werr)
		}
	}
	return joined(errs)
}

// joined is the one error itself (its message unwrapped), or all
// of them.
func joined(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}
