package explorer

import (
	"errors"
)

// Account is one MySQL user on one instance as mysql.user holds it: a
// primary password and at most one secondary (RETAIN CURRENT PASSWORD).
// Each behaviour encoded here is proven on a real mysqld by
// internal/backend/mysql TestPasswordSemanticsOnRealMySQL: a second RETAIN
// evicts the original; IDENTIFIED BY without RETAIN replaces the primary
// and keeps the secondary; DISCARD OLD PASSWORD drops the secondary;
// statements run with sql_log_bin=0 stay on their instance. The backend
// decisions carried out on them are the MySQL backend's, tested on real
// servers there (TestRepairPendingOnRealMySQL, TestReinitRepairOnRealMySQL,
// TestRetireInstanceThatMissedPhase1OnRealMySQL); consumers that keep what
// they read at start are test/e2e TestPodConsumersSeeLockouts'.
type Account struct {
	Exists    bool   `json:"e,omitempty"`
	Primary   string `json:"p,omitempty"`
	Secondary string `json:"s,omitempty"`
	// Hand: a person changed it by hand; consumers refused here are the
	// DBA's doing, not rekey's, until rekey resets it, or writes it after
	// the DBA set it back (Fixed).
	Hand  bool `json:"h,omitempty"`
	Fixed bool `json:"f,omitempty"`
	// Marked: rekey created it for the set and marks it so (MySQL's user
	// attribute rekey.io/set, set in the CREATE USER); one that existed
	// before rekey (adopted) carries no mark. Release removes the mark;
	// Deprovision drops what carries it.
	Marked bool `json:"m,omitempty"`
	// Minted: rekey created it (a Ceph record ending in "minted"), not
	// adopted it; deletionPolicy Delete removes only what rekey minted.
	Minted bool `json:"mi,omitempty"`
	// Gen and DualMark: the generation mark rekey writes with its own
	// statements (the MySQL backend's rekey.io/applied attribute): the
	// generation it last applied, and whether that left two passwords. A
	// person's ALTER USER leaves it as it is. Gen 0: none.
	Gen      int64 `json:"g,omitempty"`
	DualMark bool  `json:"dm,omitempty"`
}

// mark records what rekey applied (gen 0: unknown, nothing recorded).
func (a *Account) mark(gen int64, dual bool) {
	if gen > 0 {
		a.Gen, a.DualMark = gen, dual
	}
}

// stale: the mark says the user missed what the set did since, whose
// current generation is gen (the MySQL backend's staleMark).
func (a Account) stale(gen int64) bool {
	return a.Exists && a.Gen > 0 && gen > 0 && (a.Gen < gen || a.Gen == gen && a.DualMark)
}

// resetToCur is what the MySQL backend's resetStale does to a stale user:
// IDENTIFIED BY cur, then DISCARD OLD PASSWORD marked current.
func (a *Account) resetToCur(cur string, gen int64) {
	a.identifiedBy(cur, false)
	a.discard()
	a.mark(gen, false)
}

// Accepts: MySQL logs the user in with pw.
func (a Account) Accepts(pw string) bool {
	return a.Exists && pw != "" && (a.Primary == pw || a.Secondary == pw)
}

// Dual: a secondary password exists.
func (a Account) Dual() bool { return a.Exists && a.Secondary != "" }

// identifiedBy is ALTER USER ... IDENTIFIED BY pw [RETAIN CURRENT PASSWORD].
// A hand-changed user stays the DBA's (Hand) until set back or reset.
func (a *Account) identifiedBy(pw string, retain bool) {
	if retain {
		a.Secondary = a.Primary
	}
	a.Primary = pw
	a.written()
}

// discard is ALTER USER ... DISCARD OLD PASSWORD.
func (a *Account) discard() {
	a.Secondary = ""
	a.written()
}

// written: rekey changed the user; one the DBA set back is rekey's again.
func (a *Account) written() {
	if a.Fixed {
		a.Hand, a.Fixed = false, false
	}
}

// create is CREATE USER ... IDENTIFIED BY pw, by someone else than rekey.
func (a *Account) create(pw string) { *a = Account{Exists: true, Primary: pw} }

// make is rekey's CREATE USER: marked for the set.
func (a *Account) make(pw string) { *a = Account{Exists: true, Primary: pw, Marked: true} }

// Instance is one mysqld: its users, and whether it is part of the
// cluster now (a scaled-in replica keeps its volume and returns with it).
// Credential DDL runs with sql_log_bin=0, so nothing replicates between
// instances: each is changed only by what runs on it.
type Instance struct {
	Name    string             `json:"n"`
	Present bool               `json:"on,omitempty"`
	Users   map[string]Account `json:"u"`
	// Down: it does not answer (stopped, partitioned); nobody reaches it,
	// neither rekey nor consumers.
	Down bool `json:"down,omitempty"`
	// Returned: it came back to the cluster (with its volume, or rebuilt)
	// and no reconcile has finished since. What it holds then is a fault
	// outside rekey: no lockout holds it to the rule only from the set's
	// next reconcile on.
	Returned bool `json:"ret,omitempty"`
	// Returned2 is Returned for the second set of a two-set world
	// (twosets.go): each set is held to the rule from its own next
	// reconcile on.
	Returned2 bool `json:"ret2,omitempty"`
	// Stranded: it returned with its volume holding an admin password the
	// source Secret no longer holds (it was away while a rotation of the
	// admin completed): rekey cannot log in there, and says so, until a
	// person sets the admin's password there or rebuilds it.
	Stranded bool `json:"str,omitempty"`
	// The instance's role as the cluster manager sets it (switchover.go):
	// RO is read_only and super_read_only on; From the instance it
	// replicates from ("": none); Stopped, that channel's threads are
	// stopped (STOP REPLICA, RESET REPLICA on a new primary).
	RO      bool   `json:"ro,omitempty"`
	From    string `json:"from,omitempty"`
	Stopped bool   `json:"stop,omitempty"`
}

// errDown is what connecting to an instance that does not answer gives.
var errDown = errors.New("connection refused")

func (in *Instance) acct(key string) Account { return in.Users[key] }

func (in *Instance) set(key string, a Account) { in.Users[key] = a }

// The model's users: the admin rekey connects as is rotated by the set
// (MOCO's preset works so), and one application user.
const (
	AdminKey = "ADMIN_PASSWORD"
	AppKey   = "APP_PASSWORD"
)

var modelKeys = []string{AdminKey, AppKey}
