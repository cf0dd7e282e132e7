package postgres

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Keys of CloudNativePG's application Secret beyond username and password.
const (
	KeyHost    = "host"
	KeyPort    = "port"
	KeyDBName  = "dbname"
	KeyURI     = "uri"
	KeyJDBCURI = "jdbc-uri"
	KeyPgpass  = "pgpass"
)

// connection is where applications connect; nil renders only the login.
type connection struct {
	host   string
	port   int
	dbname string
}

func newConnection(c *v1.PostgresConnection) *connection {
	if c == nil {
		return nil
	}
	port := int(c.Port)
	if port == 0 {
		port = 5432
	}
	return &connection{host: c.Host, port: port, dbname: c.DBName}
}

// render is what a distributed Secret holds for a login: username and
// password (the Zalando operator's layout) and, with a connection,
// CloudNativePG's application Secret layout.
func render(c *connection, user, password string) map[string][]byte {
	out := map[string][]byte{KeyUsername: []byte(user), KeyPassword: []byte(password)}
	if c == nil {
		return out
	}
	port := strconv.Itoa(c.port)
	hostPort := net.JoinHostPort(c.host, port)
	uri := url.URL{Scheme: "postgresql", User: url.UserPassword(user, password), Host: hostPort, Path: "/" + c.dbname}
	q := url.Values{}
	q.Set("user", user)
	q.Set("password", password)
	jdbc := fmt.Sprintf("jdbc:postgresql://%s/%s?%s", hostPort, url.PathEscape(c.dbname), q.Encode())
	out[KeyHost] = []byte(c.host)
	out[KeyPort] = []byte(port)
	out[KeyDBName] = []byte(c.dbname)
	out[KeyURI] = []byte(uri.String())
	out[KeyJDBCURI] = []byte(jdbc)
	out[KeyPgpass] = []byte(strings.Join([]string{pgpassField(c.host), port, pgpassField(c.dbname), pgpassField(user), pgpassField(password)}, ":") + "\n")
	return out
}

// pgpassField escapes : and \ as libpq's password file reads them.
func pgpassField(s string) string {
	return strings.NewReplacer(`\`, `\\`, `:`, `\:`).Replace(s)
}

// TargetKey is where a distribution target carrying only login (its base;
// distribution[].login) holds key k of the set's rendering: the login's
// own keys without the "<base>." of a set with several logins, the names
// CloudNativePG's and the Zalando operator's Secrets use; false for the
// other logins' keys.
func TargetKey(spec *v1.PostgresSpec, login, k string) (string, bool) {
	if len(spec.Logins) == 0 {
		return k, login == spec.Login.Base
	}
	return strings.CutPrefix(k, login+".")
}

// CheckTargetLogin refuses a target's login that is not one of the set's.
func CheckTargetLogin(spec *v1.PostgresSpec, login string) error {
	var known []string
	for _, l := range spec.RotatingLogins() {
		if l.Base == login {
			return nil
		}
		known = append(known, l.Base)
	}
	return fmt.Errorf("login %q is not a login of this set: name one of %s (a login's base), or remove login to write every login's keys",
		login, strings.Join(known, ", "))
}
