package mysql

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestResolveUsers(t *testing.T) {
	cases := []struct {
		name    string
		spec    v1.MySQLSpec
		want    []string // name@host=KEY
		wantErr string
	}{
		{"explicit user with defaults", v1.MySQLSpec{Users: []v1.MySQLUser{{Name: "orders-api"}}}, []string{"orders-api@%=ORDERS_API_PASSWORD"}, ""},
		{"moco preset keeps MOCO's keys", v1.MySQLSpec{Preset: "moco"}, []string{"moco-admin@%=ADMIN_PASSWORD", "moco-writable@%=WRITABLE_PASSWORD"}, ""},
		{"preset plus an application user", v1.MySQLSpec{Preset: "moco", Users: []v1.MySQLUser{{Name: "app", Host: "10.%", SecretKey: "APP"}}}, []string{"moco-repl@%=REPLICATION_PASSWORD", "app@10.%=APP"}, ""},
		{"nothing", v1.MySQLSpec{}, nil, "no users to rotate"},
		{"unknown preset", v1.MySQLSpec{Preset: "vitess"}, nil, `unknown preset "vitess"`},
		{"duplicate key", v1.MySQLSpec{Users: []v1.MySQLUser{{Name: "a", SecretKey: "K"}, {Name: "b", SecretKey: "K"}}}, nil, "share secretKey K"},
		{"preset user listed again", v1.MySQLSpec{Preset: "moco", Users: []v1.MySQLUser{{Name: "moco-admin", SecretKey: "X"}}}, nil, "listed twice"},
		{"quote in a name", v1.MySQLSpec{Users: []v1.MySQLUser{{Name: "a'b"}}}, nil, "user name"},
		{"quote in a host", v1.MySQLSpec{Users: []v1.MySQLUser{{Name: "a", Host: "x'"}}}, nil, "host"},
		{"SQL in a privilege", v1.MySQLSpec{Users: []v1.MySQLUser{{Name: "a", Grants: []v1.MySQLGrant{{Privileges: []string{"SELECT; DROP"}, Object: "*.*"}}}}}, nil, "privilege"},
		{"pending suffix", v1.MySQLSpec{Users: []v1.MySQLUser{{Name: "a", SecretKey: "A_PENDING"}}}, nil, "_PENDING"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			users, err := ResolveUsers(&c.spec)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, u := range users {
				got[u.String()+"="+u.Key] = true
			}
			for _, w := range c.want {
				if !got[w] {
					t.Fatalf("missing %s in %v", w, got)
				}
			}
		})
	}
}

func TestQuoteEscapesEverythingMySQLWouldInterpret(t *testing.T) {
	cases := map[string]string{
		`plain`:      `'plain'`,
		`it's`:       `'it\'s'`,
		`back\slash`: `'back\\slash'`,
		"nul\x00":    `'nul\0'`,
		"nl\n":       `'nl\n'`,
		"ctrlz\x1a":  `'ctrlz\Z'`,
	}
	for in, want := range cases {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestRedactRemovesSecrets(t *testing.T) {
	err := redact(errString("syntax error near 'Sup3rSecretValue' at line 1"), "Sup3rSecretValue")
	if strings.Contains(err.Error(), "Sup3rSecretValue") {
		t.Fatal("secret survived redaction")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestGrantPrivilegesCannotSmuggleClauses: the backend re-checks what
// admission checks; GRANT OPTION only through withGrantOption.
func TestGrantPrivilegesCannotSmuggleClauses(t *testing.T) {
	for _, p := range []string{"GRANT OPTION", "ALL PRIVILEGES WITH GRANT OPTION", "SELECT ON MYSQL", "SELECT, INSERT",
		"SELECT; DROP USER root", "SELECT (password)", "select", "SHOW VIEW ", "PROXY ON x"} {
		spec := &v1.MySQLSpec{Users: []v1.MySQLUser{{Name: "a", Grants: []v1.MySQLGrant{{Privileges: []string{"SELECT", p}, Object: "*.*"}}}}}
		if _, err := ResolveUsers(spec); err == nil || !strings.Contains(err.Error(), "withGrantOption for the grant option") {
			t.Errorf("privilege %q: err = %v, want refused with what to write instead", p, err)
		}
	}
	spec := &v1.MySQLSpec{Users: []v1.MySQLUser{{Name: "a", Grants: []v1.MySQLGrant{{Object: "*.*"}}}}}
	if _, err := ResolveUsers(spec); err == nil || !strings.Contains(err.Error(), "at least one privilege") {
		t.Errorf("empty privileges: err = %v", err)
	}
	spec = &v1.MySQLSpec{Users: []v1.MySQLUser{{Name: "a", Grants: []v1.MySQLGrant{
		{Privileges: []string{"ALL PRIVILEGES"}, Object: "*.*", WithGrantOption: true},
		{Privileges: []string{"SHOW VIEW", "CREATE TEMPORARY TABLES", "BACKUP_ADMIN"}, Object: "app.t$1"}}}}}
	users, err := ResolveUsers(spec)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"GRANT ALL PRIVILEGES ON *.* TO 'a'@'%' WITH GRANT OPTION",
		"GRANT SHOW VIEW, CREATE TEMPORARY TABLES, BACKUP_ADMIN ON `app`.`t$1` TO 'a'@'%'"}
	if got := users[0].grantStatements(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("grant statements:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestBackendPatternsMatchAdmission: every pattern the backend re-checks is
// the one admission enforces, so neither can drift from the other.
func TestBackendPatternsMatchAdmission(t *testing.T) {
	src, err := os.ReadFile("../../../api/v1alpha1/mysql_types.go")
	if err != nil {
		t.Fatal(err)
	}
	for name, re := range map[string]*regexp.Regexp{"user name": namePattern, "host": hostPattern, "privilege": privPattern,
		"grant object": onPattern, "secretKey": keyPattern, "instance address": addrPattern, "tlsServerName": serverNamePattern} {
		if !strings.Contains(string(src), "Pattern=`"+re.String()+"`") {
			t.Errorf("the backend's %s pattern %s is not an admission pattern in api/v1alpha1/mysql_types.go", name, re)
		}
	}
}

// Without leaves users out of a backend (a user added mid-rotation), but
// never the admin it logs in as, and leaves the backend it came from as
// it was.
func TestWithout(t *testing.T) {
	b := &Backend{AdminUser: "root", AdminKey: "ROOT_PASSWORD", Users: []User{
		{Name: "root", Host: "%", Key: "ROOT_PASSWORD"}, {Name: "app", Host: "%", Key: "APP_PASSWORD"}, {Name: "app2", Host: "%", Key: "APP2_PASSWORD"}}}
	n, ok := b.Without([]string{"APP2_PASSWORD"})
	if !ok || !slices.Equal(n.Keys(), []string{"ROOT_PASSWORD", "APP_PASSWORD"}) {
		t.Fatalf("Without(APP2): %v %v", ok, n)
	}
	if len(b.Keys()) != 3 {
		t.Fatalf("the original backend changed: %v", b.Keys())
	}
	if _, ok := b.Without([]string{"ROOT_PASSWORD"}); ok {
		t.Fatal("Without left out the admin rekey logs in as")
	}
}
