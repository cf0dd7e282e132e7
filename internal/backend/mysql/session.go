package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// Instance is one mysqld the backend acts on.
type Instance struct {
	Name string // e.g. the pod name, or host:port
	Addr string // host:port, where rekey dials
	// ServerName is the host the instance is known by in the spec, which
	// its TLS certificate is verified for (unless tlsServerName is set);
	// default Addr's host. It differs from Addr's only where a test maps
	// cluster DNS names onto local ports.
	ServerName string
}

// session is one dedicated connection to an instance, prepared for
// credential DDL: sql_log_bin=0 so nothing reaches any binlog (a cluster
// replicating from this one, even across clusters, must never receive a
// credential change), and super_read_only lifted when the instance has it
// on — the role is read live, never assumed — but only while statements
// that change accounts run (see write).
type session struct {
	inst Instance
	db   *sql.DB
	conn *sql.Conn
	// lift: the session will run credential DDL, so super_read_only is
	// lifted on a read-only instance around it. A session that only reads
	// (the health gate, the precheck) leaves it alone.
	lift bool
	// liftedSRO: super_read_only is off now and this session is to turn
	// it back on (it lifted it, or found it left off by a crashed run).
	liftedSRO bool
	opened    role     // the role when the session opened
	step      string   // names failpoints: the phase this session serves
	secrets   []string // redacted from every error this session returns
	// owner marks the users this session creates, except those whose
	// source Secret key is adopted (owner.go); "" marks none.
	owner   string
	adopted map[string]bool
	// gen and target: the set's current generation and the one its
	// rotation produces, recorded on the users (generation.go); 0: unknown.
	gen, target int64
	// fence: a session that changes accounts locks the set and checks
	// and records the leadership term first (fence.go); nil: none.
	fence *fencing
	// termRecord is the statement that records the term, run with the
	// session's first account statement or, if it makes none, as it
	// closes ("": nothing left to record). The set's lock is held from
	// the check to the close, so no other manager sees the difference.
	termRecord string
}

// dialTimeout bounds how long an unreachable instance holds a phase.
const dialTimeout = 5 * time.Second

// connectTimeout bounds a login: the dial, the server's greeting, TLS and
// authentication. A host that accepts the connection and never answers (a
// black hole: a dead mysqld behind a live proxy, a firewall that drops
// after the handshake) would otherwise hold the reconcile, its worker and
// the keyed lock of its backend for the 30 s read timeout at each login;
// it is unreachable after this long, and the set is retried as for any
// unreachable instance.
const connectTimeout = 10 * time.Second

// connect bounds one login by connectTimeout: the error of a login that
// ran out of time says so.
func connect(ctx context.Context, login func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	err := login(cctx)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		err = &loginTimeout{after: connectTimeout, err: err}
	}
	return err
}

// openSession connects as user with the first password that MySQL accepts.
// lift says whether the session runs credential DDL (see session.lift).
// A login MySQL refuses is a *loginFailure, which the Backend turns into a
// refusal naming where the admin's password comes from.
func openSession(ctx context.Context, step string, lift bool, f *fencing, inst Instance, t transport, user string, passwords ...string) (*session, error) {
	var refused *loginFailure
	for _, pw := range passwords {
		if pw == "" {
			continue
		}
		db, err := t.open(inst, user, pw)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		var conn *sql.Conn
		err = connect(ctx, func(ctx context.Context) (err error) {
			conn, err = db.Conn(ctx)
			return err
		})
		if err != nil {
			db.Close()
			lf, ok := asLoginFailure(inst, user, err)
			if !ok {
				return nil, t.connError(inst, err, passwords...)
			}
			refused = lf
			if lf.kind == failLocked {
				// Any password is refused while the account is locked,
				// and each try counts as one more failed login.
				break
			}
			continue
		}
		s := &session{inst: inst, db: db, conn: conn, secrets: passwords, step: step, lift: lift}
		if lift {
			s.fence = f
		}
		if err := s.prepare(ctx); err != nil {
			s.termRecord = "" // a session that failed to open records nothing
			s.close(ctx)
			return nil, err
		}
		return s, nil
	}
	if refused == nil {
		return nil, fmt.Errorf("log in to %s as %s: no password to connect with", inst.Name, user)
	}
	return nil, refused
}

// loginFailure: MySQL refused a login (error 1045, a locked account, an
// expired password). The text is rekey's; the error number is all that is
// kept of MySQL's answer.
type loginFailure struct {
	inst, user string
	kind       failKind // failAuth or failLocked
	text       string   // e.g. "MySQL error 3955 (the account is locked ...)"
	err        error
}

func (e *loginFailure) Error() string {
	return fmt.Sprintf("%s for user %s at %s", e.text, e.user, e.inst)
}

func (e *loginFailure) Unwrap() error { return e.err }

// asLoginFailure reports whether err is MySQL refusing user's login.
func asLoginFailure(inst Instance, user string, err error) (*loginFailure, bool) {
	var me *driver.MySQLError
	if !errors.As(err, &me) {
		return nil, false
	}
	kind, text := explainMySQL(me)
	if kind != failAuth && kind != failLocked {
		return nil, false
	}
	return &loginFailure{inst: inst.Name, user: user, kind: kind, text: text, err: me}, true
}

// checkLogin opens and closes a plain connection as user: the observable
// proof that MySQL accepts password for it.
func checkLogin(ctx context.Context, t transport, inst Instance, user, password string) error {
	db, err := t.open(inst, user, password)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := connect(ctx, db.PingContext); err != nil {
		if isAccessDenied(err) {
			return &loginRefused{inst: inst.Name, user: user}
		}
		if lf, ok := asLoginFailure(inst, user, err); ok && lf.kind == failLocked {
			// Not the password's fault, and trying another one counts as
			// one more failed login.
			return &engine.Refusal{Reason: string(reason.AuthenticationFailed), Message: fmt.Sprintf(
				"%s: consumers of user %s cannot log in either; nothing was changed: unlock the account on the server (ALTER USER ... ACCOUNT UNLOCK)", lf.Error(), user)}
		}
		return t.connError(inst, err, password)
	}
	return nil
}

// loginRefused: MySQL answered and refused the password. Any other error
// of checkLogin says nothing about the password (the instance is down, or
// its certificate does not verify) and must not be reported as if it did.
type loginRefused struct{ inst, user string }

func (e *loginRefused) Error() string { return e.inst + " refused the password of " + e.user }

func isLoginRefused(err error) bool {
	var lr *loginRefused
	return errors.As(err, &lr)
}

func (s *session) prepare(ctx context.Context) error {
	// sql_log_bin=0 first: before super_read_only is lifted, so that not
	// even the toggle of a replica's state is logged. sql_mode='' because
	// our own literal escaping assumes backslash escapes are on. One
	// statement, one round trip: MySQL applies a SET's assignments in
	// order; if it fails, the session is closed unused.
	if err := s.exec(ctx, "SET SESSION sql_log_bin=0, sql_mode=''"); err != nil {
		return err
	}
	if s.lift {
		failpoint.Hit(s.step + "/session-opened")
	}
	if s.fence != nil {
		// Before anything changes, super_read_only included.
		if err := s.lockAndCheck(ctx, s.fence); err != nil {
			return err
		}
	}
	// The role is read live. read_only marks an instance that must not
	// take writes (a replica, an intermediate primary); super_read_only
	// is lifted there for the DDL. read_only stays ON when only
	// super_read_only is lifted, so an instance a crashed rekey left with
	// super_read_only=OFF is recognised here and restored right away.
	// Whether it replicates is kept too: settle compares it with what the
	// instance says then (see restoreSuperReadOnly).
	r, err := readRole(ctx, s.conn)
	if err != nil {
		return s.wrap("read the role", err)
	}
	s.opened = r
	s.liftedSRO = s.lift && r.readOnly && !r.superReadOnly
	if s.fence != nil {
		if s.termRecord, err = s.recordStatement(ctx, s.fence); err != nil {
			return err
		}
	}
	return s.settle(ctx)
}

// write runs one statement that changes accounts, super_read_only lifted
// first on a read-only instance. It stays lifted for the statements that
// follow, until settle: a replica is writable only while rekey's own DDL
// runs, not while rekey logs in or waits for another instance. A cluster
// manager that finds a replica writable takes it back (MOCO's loop kills
// every connection to it and turns super_read_only on); the shorter the
// window, the rarer that is, and it costs one retry of the phase when it
// happens.
func (s *session) write(ctx context.Context, stmt string) error {
	if err := s.liftForWrite(ctx); err != nil {
		return err
	}
	return s.exec(ctx, stmt)
}

// liftForWrite lifts super_read_only, if the instance had it (or
// read_only) on when the session opened and it is not lifted already,
// then records the term if it is not recorded yet.
func (s *session) liftForWrite(ctx context.Context) error {
	if !s.lift {
		return fmt.Errorf("%s: a read-only session was asked to change accounts", s.inst.Name)
	}
	if !s.liftedSRO && (s.opened.readOnly || s.opened.superReadOnly) {
		if err := s.exec(ctx, "SET GLOBAL super_read_only=OFF"); err != nil {
			return err
		}
		s.liftedSRO = true
		failpoint.Hit(s.step + "/read-only-lifted")
	}
	if rec := s.termRecord; rec != "" {
		s.termRecord = ""
		return s.exec(ctx, rec)
	}
	return nil
}

// settle restores super_read_only if this session has it lifted (see
// restore); a later write lifts it again.
func (s *session) settle(ctx context.Context) error {
	if !s.liftedSRO {
		return nil
	}
	err := s.restore(ctx)
	s.liftedSRO = false
	return err
}

// close restores super_read_only if this session lifted it and the
// instance still plays the role it had then. The role is read again first,
// in this session: a switchover during the phase may have promoted the
// instance, and turning super_read_only back on would make the new primary
// refuse every write. Should the restore fail (a crash, a lost
// connection), the cluster manager's loop restores it on replicas, as
// MOCO's clustering loop does.
func (s *session) close(ctx context.Context) error {
	var err error
	if s.termRecord != "" {
		// A session that changed nothing still leaves its term: an older
		// manager is refused here from now on, as if it had.
		err = s.liftForWrite(ctx)
	}
	err = errors.Join(err, s.settle(ctx))
	s.conn.Close()
	s.db.Close()
	return err
}

func (s *session) restore(ctx context.Context) error {
	now, err := readRole(ctx, s.conn)
	if err != nil {
		return s.wrap("re-read the role before restoring super_read_only", err)
	}
	if !restoreSuperReadOnly(s.liftedSRO, s.opened, now) {
		return nil
	}
	return s.exec(ctx, "SET GLOBAL super_read_only=ON")
}

// restoreSuperReadOnly decides, as a session closes, whether to turn
// super_read_only back on: only if this session lifted it and the instance
// is still a read-only member in the role it had when it was lifted.
// opened and now are what the instance said of itself then and now.
func restoreSuperReadOnly(lifted bool, opened, now role) bool {
	switch {
	case !lifted:
		return false // not rekey's to restore
	case now.superReadOnly:
		return false // already back on (the cluster manager)
	case !now.readOnly:
		// Made writable meanwhile: promoted to primary. super_read_only
		// would turn read_only back on with it.
		return false
	case opened.replica && !now.replica:
		// Its replication was removed meanwhile (STOP REPLICA, RESET
		// REPLICA ALL): a switchover is promoting it and is about to
		// make it writable; the cluster manager decides its mode now.
		return false
	}
	return true
}

func (s *session) exec(ctx context.Context, stmt string) error {
	if _, err := s.conn.ExecContext(ctx, stmt); err != nil {
		return s.wrap(firstWords(stmt), err)
	}
	return nil
}

// redactedError keeps secret values and whatever a server sent out of
// messages: MySQL may echo part of a statement ("near '...'") in a syntax
// error, and its messages name the manager's address. The chain is kept
// for rekey's own decisions (error numbers), never for text.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Unwrap() error { return e.err }

func redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg, changed := scrubbed(err)
	for _, s := range secrets {
		if len(s) >= 4 && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &redactedError{msg, err}
}

func firstWords(s string) string {
	f := strings.Fields(s)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}
