package postgres

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Source Secret keys: a generation is a login role and its password.
const (
	KeyUsername = "username"
	KeyPassword = "password"
)

// ownerMark is the comment rekey puts on every login role it creates for a
// set: roles without the set's mark are never changed or dropped.
func ownerMark(uid string) string { return "rekey.io/owner=" + uid }

var (
	uidShape  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	roleShape = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	baseShape = regexp.MustCompile(`^[a-z][a-z0-9_]{0,49}$`)
	genSuffix = regexp.MustCompile(`_g[0-9]+$`)
)

// loginName is generation gen's login role. An underscore rather than
// RabbitMQ's dash: the name then needs no quoting in psql, a pgbouncer
// userlist or a JDBC URL, and stays a plain identifier everywhere.
func loginName(base string, gen int64) string { return base + "_g" + strconv.FormatInt(gen, 10) }

// generationOf is the generation a login role of base carries.
func generationOf(base, role string) (int64, bool) {
	rest, ok := strings.CutPrefix(role, base+"_g")
	if !ok || rest == "" || strings.TrimLeft(rest, "0123456789") != "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n > 0
}

// ident quotes a role name by pgx's rules.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// literal quotes a string rekey made itself (a verifier, an owner mark);
// anything else is refused rather than escaped.
func literal(s string) (string, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '\'' || c == '\\' {
			return "", fmt.Errorf("internal: a value bound for SQL holds %q", c)
		}
	}
	return "'" + s + "'", nil
}

func checkBase(base string) error {
	if !baseShape.MatchString(base) || genSuffix.MatchString(base) {
		return fmt.Errorf("postgres.login.base %q: use 1 to 50 lower-case letters, digits and _, starting with a letter and not ending in _g<number>", base)
	}
	return nil
}

func checkGroup(group, base string) error {
	if !roleShape.MatchString(group) || strings.HasPrefix(group, "pg_") {
		return fmt.Errorf("postgres.login.group %q: name an existing role of up to 63 lower-case letters, digits and _ (not a pg_* role)", group)
	}
	if _, own := generationOf(base, group); own || group == base {
		return fmt.Errorf("postgres.login.group %q is named like one of this set's own login roles: name the role that owns the application's objects", group)
	}
	return nil
}
