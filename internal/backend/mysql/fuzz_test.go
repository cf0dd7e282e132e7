package mysql

import (
	"regexp"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// unquote undoes quote as MySQL's parser would (backslash escapes on).
func unquote(t *testing.T, q string) string {
	if len(q) < 2 || q[0] != '\'' || q[len(q)-1] != '\'' {
		t.Fatalf("not a quoted literal: %q", q)
	}
	var b strings.Builder
	body := q[1 : len(q)-1]
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '\'' {
			t.Fatalf("unescaped quote in %q", q)
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(body) {
			t.Fatalf("dangling backslash in %q", q)
		}
		switch body[i] {
		case '0':
			b.WriteByte(0)
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'Z':
			b.WriteByte(0x1a)
		default:
			b.WriteByte(body[i])
		}
	}
	return b.String()
}

// Secrets adopted from users' Secrets may hold any bytes: the literal must
// always be one well-formed string that reads back as the same bytes.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "plain", "it's", `a\'b`, "\x00\n\r\x1a", `\`, `'; DROP USER root; --`} {
		f.Add(s)
	}
	f.Add("\xff\xfe not UTF-8")
	f.Fuzz(func(t *testing.T, s string) {
		if got := unquote(t, quote(s)); got != s {
			t.Fatalf("quote(%q) reads back as %q", s, got)
		}
	})
}

// Whatever a CredentialSet says, a user accepted by ResolveUsers yields SQL
// where its name and host are plain single-quoted literals, and each grant
// is exactly one GRANT ... ON ... TO statement that holds the grant option
// only when withGrantOption says so.
func FuzzResolveUsers(f *testing.F) {
	f.Add("app", "%", "APP_PASSWORD", "SELECT", "SHOW VIEW", "app.*", false)
	f.Add("x'; DROP USER root; --", "%", "", "ALL PRIVILEGES", "SELECT", "*.*", true)
	f.Add("a", "10.0.0.%", "A", "SELECT, INSERT", "GRANT OPTION", "db.`t`", false)
	f.Add("a", "%", "A", "ALL PRIVILEGES WITH GRANT OPTION", "SELECT", "*.*", false)
	f.Add("a", "%", "A", "SELECT", "PROXY ON x TO y", "*.*", false)
	f.Fuzz(func(t *testing.T, name, host, key, priv1, priv2, on string, withGrant bool) {
		spec := &v1.MySQLSpec{Users: []v1.MySQLUser{{Name: name, Host: host, SecretKey: key,
			Grants: []v1.MySQLGrant{{Privileges: []string{priv1, priv2}, Object: on, WithGrantOption: withGrant}}}}}
		users, err := ResolveUsers(spec)
		if err != nil {
			return
		}
		u := users[0]
		if u.Account() != "'"+u.Name+"'@'"+u.Host+"'" || strings.ContainsAny(u.Name+u.Host, `'\`) {
			t.Fatalf("accepted name %q host %q do not make two plain literals: %s", u.Name, u.Host, u.Account())
		}
		for _, s := range u.grantStatements() {
			if strings.ContainsAny(s, "\\;\"\n\x00#") || strings.Contains(s, "/*") || strings.Count(s, "'") != 4 {
				t.Fatalf("accepted input produced unsafe SQL: %q", s)
			}
			if !grantShape.MatchString(s) {
				t.Fatalf("accepted input produced a statement of another shape: %q", s)
			}
			if strings.Contains(s, "GRANT OPTION") != withGrant || strings.Count(s, "GRANT") != 1+boolInt(withGrant) {
				t.Fatalf("grant option in %q, but withGrantOption is %v", s, withGrant)
			}
		}
	})
}

// grantShape is the only statement grantStatements may produce: privileges
// (words separated by single spaces, items by ", "), a quoted or wildcard
// object, the account, and the grant option at the end when asked for.
var grantShape = regexp.MustCompile("^GRANT [A-Z][A-Z0-9_]*( [A-Z][A-Z0-9_]*)*(, [A-Z][A-Z0-9_]*( [A-Z][A-Z0-9_]*)*)* ON (\\*|`[A-Za-z0-9_$]+`)\\.(\\*|`[A-Za-z0-9_$]+`) TO '[^'\\\\]+'@'[^'\\\\]+'( WITH GRANT OPTION)?$")

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FuzzPrivilege: one privilege item is a single word or one of MySQL's
// multi-word privileges — never GRANT OPTION, never a clause.
func FuzzPrivilege(f *testing.F) {
	for _, s := range []string{"SELECT", "SHOW VIEW", "GRANT OPTION", "ALL PRIVILEGES WITH GRANT OPTION", "SELECT ON", "REPLICATION SLAVE", "CREATE TEMPORARY TABLES", "BACKUP_ADMIN", "select"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !privPattern.MatchString(p) {
			return
		}
		words := strings.Split(p, " ")
		if len(words) > 1 && !multiWordPrivileges[p] {
			t.Fatalf("privilege %q accepted: not one of MySQL's multi-word privileges", p)
		}
		for _, w := range words {
			switch w {
			case "OPTION", "WITH", "ON", "TO", "IDENTIFIED", "REQUIRE", "AS":
				if len(words) > 1 {
					t.Fatalf("privilege %q holds the keyword %s", p, w)
				}
			}
		}
	})
}

var multiWordPrivileges = map[string]bool{
	"ALL PRIVILEGES": true, "ALTER ROUTINE": true, "CREATE ROLE": true, "CREATE ROUTINE": true,
	"CREATE TABLESPACE": true, "CREATE TEMPORARY TABLES": true, "CREATE USER": true, "CREATE VIEW": true,
	"DROP ROLE": true, "LOCK TABLES": true, "REPLICATION CLIENT": true, "REPLICATION SLAVE": true,
	"SHOW DATABASES": true, "SHOW VIEW": true,
}
