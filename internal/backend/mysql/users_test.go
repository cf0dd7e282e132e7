package mysql

import (
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
