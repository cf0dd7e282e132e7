package mysql

import (
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
// where its name and host are plain single-quoted literals.
func FuzzResolveUsers(f *testing.F) {
	f.Add("app", "%", "APP_PASSWORD", "SELECT", "app.*")
	f.Add("x'; DROP USER root; --", "%", "", "ALL PRIVILEGES", "*.*")
	f.Add("a", "10.0.0.%", "A", "SELECT, INSERT", "db.`t`")
	f.Fuzz(func(t *testing.T, name, host, key, priv, on string) {
		spec := &v1.MySQLSpec{Users: []v1.MySQLUser{{Name: name, Host: host, SecretKey: key,
			Grants: []v1.MySQLGrant{{Privileges: []string{priv}, Object: on}}}}}
		users, err := ResolveUsers(spec)
		if err != nil {
			return
		}
		u := users[0]
		if u.Account() != "'"+u.Name+"'@'"+u.Host+"'" || strings.ContainsAny(u.Name+u.Host, `'\`) {
			t.Fatalf("accepted name %q host %q do not make two plain literals: %s", u.Name, u.Host, u.Account())
		}
		for _, s := range u.grantStatements() {
			if strings.ContainsAny(s, "\\;\"\n\x00") || strings.Count(s, "'") != 4 {
				t.Fatalf("accepted input produced unsafe SQL: %q", s)
			}
		}
	})
}
