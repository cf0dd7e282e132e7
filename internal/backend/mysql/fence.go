package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"rekey.io/rekey/internal/leader"
)

// Fencing a stale manager at the server. A leader that stalls past its
// Lease (a GC pause, a frozen VM) wakes up in the middle of a phase with
// what it read before, while the new leader has moved on: its Reset or
// DISCARD would then take away the password consumers were just given.
// Asking the Lease before a write narrows that window but cannot close
// it (the pause can fall between the question and the write). So each
// session that changes accounts, on each instance:
//
//  1. takes the advisory lock of the set (GET_LOCK, released when the
//     session ends): no two managers change the set's users on one
//     instance at once. Its session's wait_timeout is heldIdle, so a
//     manager frozen while holding it loses the session, and the lock,
//     after that long instead of after hours;
//  2. asks the Lease, under the lock;
//  3. reads the highest leadership term recorded on the set's users and
//     refuses if it is higher than this manager's: a manager elected later
//     has changed them, and whatever this one read is stale;
//  4. records its own term on them (ATTRIBUTE, under metadata) before it
//     changes anything, so from then on every older manager is refused —
//     with its first change, or as the session closes if it made none
//     (super_read_only is lifted only around account statements; see
//     session.write).
//
// Steps 2–4 run while the lock is held, so check and change are one
// action as far as any other rekey manager can tell. The term is the
// Lease's acquire time (leader.TermOf). A manager without leader election
// has no term and records none.

// termKey is the user attribute holding the term (User_attributes.metadata).
const termKey = "rekey.io/term"

const termPath = `'$.metadata."` + termKey + `"'`

// lockWait is how long a session waits for another manager's session on
// the same set and instance before the phase is retried later.
var lockWait = 5 * time.Second

// heldIdle is the wait_timeout of a fenced session: how long MySQL keeps
// a session, and its lock, whose client went silent. Longer than any gap
// between two statements of a phase (a login check is bounded by
// connectTimeout).
var heldIdle = 60 * time.Second

// fencing is what a session that changes accounts checks and records.
type fencing struct {
	lock  string                          // the advisory lock's name
	check func(ctx context.Context) error // the Lease; nil: none
	term  int64                           // this manager's term; 0: none
	users []User
}

// fencing is b's, or nil when b has neither a Fence nor a term.
func (b *Backend) fencing() *fencing {
	if b.Fence == nil && b.Term == 0 {
		return nil
	}
	return &fencing{lock: lockName(b.owner), check: b.Fence, term: b.Term, users: b.Users}
}

// lockName is the set's advisory lock (MySQL allows 64 characters; a UID
// has 36).
func lockName(owner string) string {
	if owner == "" {
		return "rekey.io"
	}
	return "rekey.io/" + owner
}

// lockAndCheck runs steps 1–3 in s, before it lifts super_read_only: a
// manager refused here changes nothing at all.
func (s *session) lockAndCheck(ctx context.Context, f *fencing) error {
	if err := s.exec(ctx, "SET SESSION wait_timeout="+strconv.Itoa(int(heldIdle/time.Second))); err != nil {
		return err
	}
	var got sql.NullInt64
	if err := s.conn.QueryRowContext(ctx, "SELECT GET_LOCK("+quote(f.lock)+", "+strconv.Itoa(int(lockWait/time.Second))+")").Scan(&got); err != nil {
		return s.wrap("GET_LOCK", err)
	}
	if got.Int64 != 1 {
		return fmt.Errorf("another rekey manager is changing this set's users on %s (it holds the set's lock for over %s); retried later", s.inst.Name, lockWait)
	}
	if f.check != nil {
		if err := f.check(ctx); err != nil {
			return &fencedError{err}
		}
	}
	if f.term == 0 {
		return nil
	}
	newest, err := s.newestTerm(ctx, f.users)
	if err != nil {
		return err
	}
	if refused := termRefusal(f.term, newest, s.inst.Name); refused != nil {
		return &fencedError{refused}
	}
	return nil
}

// termRefusal decides step 3: nil when term may change the users, whose
// highest recorded term is newest.
func termRefusal(term, newest int64, inst string) error {
	if newest <= term {
		return nil
	}
	return fmt.Errorf("%w: a rekey manager elected later (term %d) has already changed this set's users on %s; this one (term %d) changes nothing",
		leader.ErrNotLeader, newest, inst, term)
}

// newestTerm is the highest term recorded on users (0: none).
func (s *session) newestTerm(ctx context.Context, users []User) (int64, error) {
	if len(users) == 0 {
		return 0, nil
	}
	rows, err := s.conn.QueryContext(ctx, "SELECT JSON_UNQUOTE(JSON_EXTRACT(COALESCE(User_attributes, '{}'), "+termPath+
		")) FROM mysql.user WHERE (User, Host) IN ("+accountList(users)+")")
	if err != nil {
		return 0, s.wrap("read the recorded terms", err)
	}
	defer rows.Close()
	var newest int64
	for rows.Next() {
		var v sql.NullString
		if err := rows.Scan(&v); err != nil {
			return 0, s.wrap("read the recorded terms", err)
		}
		if t, err := strconv.ParseInt(v.String, 10, 64); err == nil && t > newest {
			newest = t
		}
	}
	if err := rows.Err(); err != nil {
		return 0, s.wrap("read the recorded terms", err)
	}
	return newest, nil
}

// recordStatement is step 4: the statement that records this manager's
// term on every user that exists (one that does not has nothing an older
// manager could take away; Apply creates it accepting the current
// password); "" when there is nothing to record. The session runs it
// with super_read_only lifted (liftForWrite), before its first change.
func (s *session) recordStatement(ctx context.Context, f *fencing) (string, error) {
	if f.term == 0 || len(f.users) == 0 {
		return "", nil
	}
	accts, err := s.accounts(ctx, f.users)
	if err != nil {
		return "", err
	}
	var names []string
	for _, u := range f.users {
		if of(accts, u).exists {
			names = append(names, u.Account())
		}
	}
	if len(names) == 0 {
		return "", nil
	}
	mark := attribute(map[string]any{termKey: strconv.FormatInt(f.term, 10)})
	return "ALTER USER " + strings.Join(names, ", ") + " ATTRIBUTE " + mark, nil
}

// accountList is users as a quoted (User, Host) list for IN (…).
func accountList(users []User) string {
	var in strings.Builder
	for i, u := range users {
		if i > 0 {
			in.WriteString(", ")
		}
		in.WriteString("(" + quote(u.Name) + ", " + quote(u.Host) + ")")
	}
	return in.String()
}
