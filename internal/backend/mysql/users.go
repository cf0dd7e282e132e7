package mysql

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/moco"
)

// User is one MySQL account that rotates.
type User struct {
	Name   string
	Host   string
	Key    string // source Secret key of its password
	Grants []v1.MySQLGrant
	// PasswordLength is the length of its generated passwords, decided by
	// passwordLength.
	PasswordLength int
}

// Account is the quoted 'name'@'host' form used in SQL.
func (u User) Account() string { return quote(u.Name) + "@" + quote(u.Host) }

func (u User) String() string { return u.Name + "@" + u.Host }

var (
	namePattern = regexp.MustCompile(`^[A-Za-z0-9_][-A-Za-z0-9_.]{0,31}$`)
	hostPattern = regexp.MustCompile(`^[A-Za-z0-9%_.:-]{1,255}$`)
	// privPattern is admission's pattern for one privilege: a single word
	// (static or dynamic privilege), or one of MySQL's multi-word static
	// privileges. No other words: a free phrase could read "GRANT OPTION"
	// (the grant option without withGrantOption saying so) or change the
	// statement's shape.
	privPattern = regexp.MustCompile(`^([A-Z][A-Z0-9_]{0,63}|ALL PRIVILEGES|ALTER ROUTINE|CREATE (ROLE|ROUTINE|TABLESPACE|TEMPORARY TABLES|USER|VIEW)|DROP ROLE|LOCK TABLES|REPLICATION (CLIENT|SLAVE)|SHOW (DATABASES|VIEW))$`)
	onPattern   = regexp.MustCompile(`^(\*|[A-Za-z0-9_$]{1,64})\.(\*|[A-Za-z0-9_$]{1,64})$`)
	keyPattern  = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,62}$`)
)

func grant(on string, privs ...string) v1.MySQLGrant {
	return v1.MySQLGrant{Privileges: privs, Object: on}
}

// mocoGrants approximate what MOCO gives each system user, so a preset
// cluster provisioned by rekey works for MOCO's components.
var mocoGrants = map[string][]v1.MySQLGrant{
	"moco-admin":       {{Privileges: []string{"ALL PRIVILEGES"}, Object: "*.*", WithGrantOption: true}},
	"moco-agent":       {grant("*.*", "BACKUP_ADMIN", "BINLOG_ADMIN", "CLONE_ADMIN", "CONNECTION_ADMIN", "RELOAD", "REPLICATION CLIENT", "REPLICATION SLAVE", "SYSTEM_VARIABLES_ADMIN", "SELECT")},
	"moco-repl":        {grant("*.*", "REPLICATION CLIENT", "REPLICATION SLAVE")},
	"moco-clone-donor": {grant("*.*", "BACKUP_ADMIN", "SERVICE_CONNECTION_ADMIN")},
	"moco-exporter":    {grant("*.*", "PROCESS", "REPLICATION CLIENT", "SELECT")},
	"moco-backup":      {grant("*.*", "BACKUP_ADMIN", "EVENT", "RELOAD", "SELECT", "SHOW VIEW", "TRIGGER", "REPLICATION CLIENT", "REPLICATION SLAVE")},
	"moco-readonly":    {grant("*.*", "PROCESS", "REPLICATION CLIENT", "SELECT", "SHOW VIEW")},
	"moco-writable":    {grant("*.*", "ALTER", "CREATE", "DELETE", "DROP", "INDEX", "INSERT", "PROCESS", "REPLICATION CLIENT", "SELECT", "SHOW VIEW", "UPDATE")},
}

// ResolveUsers turns the spec's preset or user list into validated users.
// Admission validation already rejects bad input; this is the second line,
// because these strings end up in SQL.
func ResolveUsers(spec *v1.MySQLSpec) ([]User, error) {
	var users []User
	switch spec.Preset {
	case "moco":
		// MOCO's system users, under the keys MOCO stores them in.
		for _, m := range moco.Keys {
			users = append(users, User{Name: m.User, Host: v1.DefaultMySQLUserHost, Key: m.Key, Grants: mocoGrants[m.User], PasswordLength: DefaultPasswordLength})
		}
	case "":
	default:
		return nil, fmt.Errorf("unknown preset %q: the only preset is \"moco\"", spec.Preset)
	}
	for _, u := range spec.Users {
		key := u.SecretKey
		if key == "" {
			key = DefaultKey(u.Name)
		}
		n, err := passwordLength(int(u.PasswordLength), mayReplicate(u.Name, u.Grants))
		if err != nil {
			return nil, fmt.Errorf("user %s: %w", u.Name, err)
		}
		users = append(users, User{Name: u.Name, Host: u.AccountHost(), Key: key, Grants: u.Grants, PasswordLength: n})
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("no users to rotate: set mysql.preset or mysql.users")
	}
	seen, accounts := map[string]string{}, map[string]bool{}
	for _, u := range users {
		if err := u.validate(); err != nil {
			return nil, err
		}
		if other, dup := seen[u.Key]; dup {
			return nil, fmt.Errorf("users %s and %s share secretKey %s: give each its own", other, u, u.Key)
		}
		if accounts[u.String()] {
			return nil, fmt.Errorf("user %s is listed twice (the moco preset already has it?): list it once", u)
		}
		seen[u.Key], accounts[u.String()] = u.String(), true
	}
	return users, nil
}

// DefaultKey is <NAME>_PASSWORD in upper snake case.
func DefaultKey(name string) string {
	k := strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name)) + "_PASSWORD"
	if k[0] >= '0' && k[0] <= '9' || k[0] == '_' {
		k = "U" + k
	}
	return k
}

func (u User) validate() error {
	if !namePattern.MatchString(u.Name) {
		return fmt.Errorf("user name %q: use 1-32 letters, digits, '_', '-' or '.'", u.Name)
	}
	if !hostPattern.MatchString(u.Host) {
		return fmt.Errorf("user %s: host %q: use letters, digits, '%%', '_', '.', ':' or '-'", u.Name, u.Host)
	}
	if !keyPattern.MatchString(u.Key) || strings.HasSuffix(u.Key, engine.PendingSuffix) || strings.HasSuffix(u.Key, engine.AddingSuffix) || u.Key == engine.RotationIDKey {
		return fmt.Errorf("user %s: secretKey %q: use upper-case letters, digits and '_', not ending in _PENDING or _ADDING, nor ROTATION_ID", u.Name, u.Key)
	}
	for _, g := range u.Grants {
		if !onPattern.MatchString(g.Object) {
			return fmt.Errorf("user %s: grant object %q: use db.table with * wildcards", u.Name, g.Object)
		}
		if len(g.Privileges) == 0 {
			return fmt.Errorf("user %s: grant on %s: list at least one privilege", u.Name, g.Object)
		}
		for _, p := range g.Privileges {
			if !privPattern.MatchString(p) {
				return fmt.Errorf("user %s: privilege %q: give one privilege per item, in upper case (SELECT, SHOW VIEW, BACKUP_ADMIN; withGrantOption for the grant option)", u.Name, p)
			}
		}
	}
	return nil
}

func (u User) grantStatements() []string {
	var out []string
	for _, g := range u.Grants {
		db, table, _ := strings.Cut(g.Object, ".")
		s := fmt.Sprintf("GRANT %s ON %s.%s TO %s", strings.Join(g.Privileges, ", "), ident(db), ident(table), u.Account())
		if g.WithGrantOption {
			s += " WITH GRANT OPTION"
		}
		out = append(out, s)
	}
	return out
}

func ident(s string) string {
	if s == "*" {
		return s
	}
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// quote makes a MySQL string literal. Names are validated before they get
// here; secrets (adopted ones may hold any byte) rely on this escaping.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	// Byte by byte: a secret need not be valid UTF-8, and ranging over
	// runes would replace such bytes, applying a secret nobody stored.
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		case 0:
			b.WriteString(`\0`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case 0x1a:
			b.WriteString(`\Z`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// Without implements engine.Narrower: the backend for the other users.
// The admin it logs in as cannot be left out.
func (b *Backend) Without(keys []string) (engine.Backend, bool) {
	if slices.Contains(keys, b.AdminKey) {
		return nil, false
	}
	c := *b
	c.Users = slices.DeleteFunc(slices.Clone(b.Users), func(u User) bool { return slices.Contains(keys, u.Key) })
	return &c, true
}

// only is b for the users of keys alone, the admin's too: a repair split
// by key (RepairPending), never a rotation.
func (b *Backend) only(keys []string) *Backend {
	c := *b
	c.Users = slices.DeleteFunc(slices.Clone(b.Users), func(u User) bool { return !slices.Contains(keys, u.Key) })
	return &c
}
