package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rekey.io/rekey/internal/leader"
)

// Fencing a stale manager at the server. A leader that stalls past its
// Lease wakes up with what it read before, while the new leader has moved
// on: its ALTER ROLE would replace the password consumers were just
// given, its DROP ROLE take away the login they use. Asking the Lease
// before a statement cannot close that window (the pause can fall between
// the question and the statement). So every change of the set's roles
// runs in one transaction on the primary that:
//
//  1. takes the set's advisory lock (pg_advisory_xact_lock, released at
//     commit or rollback): no two managers change the set's roles at once.
//     Its idle_in_transaction_session_timeout is heldIdle, so a manager
//     frozen while holding it loses the transaction, and the lock, after
//     that long;
//  2. asks the Lease, under the lock;
//  3. reads the highest leadership term recorded on the set's roles and
//     refuses if it is higher than this manager's;
//  4. records its own term on them before it changes anything.
//
// The term lives in the roles' comment, after the owner mark
// ("rekey.io/owner=<set UID> term=<N>"): the comment is what an admin with
// only CREATEROLE may write on the roles it manages (a role setting
// holding a custom parameter needs a superuser before PostgreSQL 16). A
// manager without leader election has no term and records none.

// lockWait is how long a transaction waits for another manager's lock on
// the set before the phase is retried later.
var lockWait = 5 * time.Second

// heldIdle bounds how long PostgreSQL keeps a fenced transaction, and its
// lock, whose client went silent. Longer than any gap between two
// statements of one fenced transaction.
var heldIdle = 60 * time.Second

const termField = " term="

// markTerm is the owner mark of uid with term recorded (term 0: the plain
// mark).
func markTerm(uid string, term int64) string {
	if term == 0 {
		return ownerMark(uid)
	}
	return ownerMark(uid) + termField + strconv.FormatInt(term, 10)
}

// parseMark splits a role's comment into the owner mark and the term
// recorded after it (0: none).
func parseMark(comment string) (mark string, term int64) {
	mark, t, ok := strings.Cut(comment, termField)
	if !ok {
		return comment, 0
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return comment, 0 // not a term rekey wrote: the comment is foreign
	}
	return mark, n
}

// lockKey is the set's advisory lock key: a hash of its UID, with a prefix
// so that it collides with no other program's lock of the same UID.
func lockKey(owner string) int64 {
	h := fnv.New64a()
	h.Write([]byte("rekey.io/" + owner))
	return int64(h.Sum64()) //nolint:gosec // a lock key: wrapping is fine
}

// fenced runs change in one transaction on s (the primary) that first
// takes the set's lock, asks the Lease and checks and records the term
// (steps 1–4 above). Without a Fence and a term (no leader election) it
// is a plain transaction. change returns errors in rekey's words (through
// b.fail), passed on as they are; what names the change in the others.
func (b *Backend) fenced(ctx context.Context, s server, what string, change func(tx pgx.Tx) error) error {
	var changeErr error
	err := pgx.BeginFunc(ctx, s.conn, func(tx pgx.Tx) error {
		if b.Fence != nil || b.Term != 0 {
			if err := b.lockAndCheck(ctx, tx); err != nil {
				return err
			}
		}
		changeErr = change(tx)
		return changeErr
	})
	var f *fencedError
	var pg *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case changeErr != nil:
		return changeErr
	case errors.As(err, &f):
		return err
	case errors.As(err, &pg) && pg.Code == "55P03": // lock_not_available
		return fmt.Errorf("another rekey manager is changing this set's roles on %s (it holds the set's lock for over %s); retried later", s.host, lockWait)
	}
	return b.fail(s.host, what, err)
}

// lockAndCheck is steps 1–4 in tx.
func (b *Backend) lockAndCheck(ctx context.Context, tx pgx.Tx) error {
	for _, st := range []string{
		"SET LOCAL lock_timeout = " + strconv.Itoa(int(lockWait/time.Millisecond)),
		"SET LOCAL idle_in_transaction_session_timeout = " + strconv.Itoa(int(heldIdle/time.Millisecond)),
	} {
		if _, err := tx.Exec(ctx, st); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(b.owner)); err != nil {
		return err
	}
	if err := b.fence(ctx); err != nil {
		return err
	}
	if b.Term == 0 {
		return nil
	}
	roles, err := b.setRoles(ctx, tx)
	if err != nil {
		return err
	}
	var newest int64
	for _, t := range roles {
		newest = max(newest, t)
	}
	if refused := termRefusal(b.Term, newest); refused != nil {
		return &fencedError{refused}
	}
	mark, err := literal(markTerm(b.owner, b.Term))
	if err != nil {
		return err
	}
	for name, t := range roles {
		if t == b.Term {
			continue
		}
		if _, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(name)+" IS "+mark); err != nil {
			return err
		}
	}
	return nil
}

// termRefusal decides step 3: nil when term may change the set's roles,
// whose highest recorded term is newest.
func termRefusal(term, newest int64) error {
	if newest <= term {
		return nil
	}
	return fmt.Errorf("%w: a rekey manager elected later (term %d) has already changed this set's roles; this one (term %d) changes nothing",
		leader.ErrNotLeader, newest, term)
}

// setRoles are the roles carrying this set's mark, with the term each
// records.
func (b *Backend) setRoles(ctx context.Context, tx pgx.Tx) (map[string]int64, error) {
	rows, err := tx.Query(ctx, `SELECT rolname, shobj_description(oid, 'pg_authid') FROM pg_roles
		WHERE shobj_description(oid, 'pg_authid') = $1 OR starts_with(shobj_description(oid, 'pg_authid'), $2)`,
		ownerMark(b.owner), ownerMark(b.owner)+termField)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name, comment string
		if err := rows.Scan(&name, &comment); err != nil {
			return nil, err
		}
		if mark, t := parseMark(comment); mark == ownerMark(b.owner) {
			out[name] = t
		}
	}
	return out, rows.Err()
}
