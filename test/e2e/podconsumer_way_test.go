package e2e

import (
	"errors"
	"sort"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"rekey.io/rekey/internal/testenv"
)

// consumerWay is how a consumer pod of one backend takes its logins from
// the Secret it read at start and logs in with them.
type consumerWay struct {
	// logins are what the pod takes from the Secret's data, in the order
	// it takes turns; none: the Secret holds no login.
	logins func(data map[string][]byte) []consumerLogin
	// perPod is how many logins a pod takes turns with.
	perPod int
	// targets are the instances the pod logs in to now.
	targets func() []consumerTarget
	// refused: the server answered and would not let the login in (a
	// lockout), as opposed to an instance that did not answer.
	refused func(error) bool
	// every is how often a pod logs in (0: consumerLoginEvery): a login
	// that runs a program is paced so that the pods do not take the
	// machine's cores from the test.
	every time.Duration
}

func (w consumerWay) interval() time.Duration {
	if w.every > 0 {
		return w.every
	}
	return consumerLoginEvery
}

type consumerLogin struct{ user, password string }

// consumerTarget is one instance: its name (in refusals) and a login.
type consumerTarget struct {
	name  string
	login func(user, password string) error
}

// mysqlWay: the Secret's keys hold the passwords of fixed users (keys:
// Secret key → user), and a login is a MySQL connection.
func mysqlWay(keys map[string]string, insts func() []*testenv.MySQLInstance) consumerWay {
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	return consumerWay{
		logins: func(data map[string][]byte) []consumerLogin {
			var out []consumerLogin
			for _, k := range sorted {
				out = append(out, consumerLogin{keys[k], string(data[k])})
			}
			return out
		},
		targets: func() []consumerTarget {
			var out []consumerTarget
			for _, i := range insts() {
				out = append(out, consumerTarget{i.Name, i.CanLogin})
			}
			return out
		},
		perPod:  len(keys),
		refused: refusedLogin,
	}
}

// refusedLogin: MySQL answered and would not let the account in — a wrong
// password (1045), a locked account (3118), an expired password (1862).
// MySQL's message names the account and host, never the password.
func refusedLogin(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1045, 3118, 1862:
		return true
	}
	return false
}

// pgWay: the Secret holds a login role's name and password (username and
// password, or <base>.username and <base>.password for each of bases when
// the set has several logins), as applications read it, and a login is a
// pgx connection over verified TLS to the primary or the replica. The role
// name changes with every generation, so the pod takes both at start.
func pgWay(p *testenv.Postgres, bases ...string) consumerWay {
	return consumerWay{
		logins: func(data map[string][]byte) []consumerLogin {
			prefixes := []string{""}
			if len(bases) > 0 {
				prefixes = nil
				for _, b := range bases {
					prefixes = append(prefixes, b+".")
				}
			}
			var out []consumerLogin
			for _, pre := range prefixes {
				if u := string(data[pre+"username"]); u != "" {
					out = append(out, consumerLogin{u, string(data[pre+"password"])})
				}
			}
			return out
		},
		targets: func() []consumerTarget {
			var out []consumerTarget
			for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
				out = append(out, consumerTarget{i.Name, func(user, password string) error { return p.CanLogin(i, user, password) }})
			}
			return out
		},
		perPod:  max(len(bases), 1),
		refused: refusedPgLogin,
	}
}

// refusedPgLogin: PostgreSQL answered and would not let the role in — a
// wrong password or a role that does not exist (28P01: SCRAM says the same
// for both), a role that may not log in or no pg_hba.conf line (28000).
// The server's message names the role, never the password.
func refusedPgLogin(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "28P01" || pe.Code == "28000")
}
