package postgres

import (
	"net/url"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestRender(t *testing.T) {
	for _, c := range []struct {
		name string
		conn *v1.PostgresConnection
		want map[string]string
	}{
		{"login only (Zalando's layout)", nil, map[string]string{"username": "app_g2", "password": "Pw0"}},
		{"CloudNativePG's layout", &v1.PostgresConnection{Host: "app-rw.team.svc", DBName: "app"}, map[string]string{
			"username": "app_g2", "password": "Pw0", "host": "app-rw.team.svc", "port": "5432", "dbname": "app",
			"uri":      "postgresql://app_g2:Pw0@app-rw.team.svc:5432/app",
			"jdbc-uri": "jdbc:postgresql://app-rw.team.svc:5432/app?password=Pw0&user=app_g2",
			"pgpass":   "app-rw.team.svc:5432:app:app_g2:Pw0\n",
		}},
		{"another port", &v1.PostgresConnection{Host: "10.0.0.7", Port: 6432, DBName: "orders"}, map[string]string{
			"username": "app_g2", "password": "Pw0", "host": "10.0.0.7", "port": "6432", "dbname": "orders",
			"uri":      "postgresql://app_g2:Pw0@10.0.0.7:6432/orders",
			"jdbc-uri": "jdbc:postgresql://10.0.0.7:6432/orders?password=Pw0&user=app_g2",
			"pgpass":   "10.0.0.7:6432:orders:app_g2:Pw0\n",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := render(newConnection(c.conn), "app_g2", "Pw0")
			if len(got) != len(c.want) {
				t.Fatalf("keys %v, want %v", keysOf(got), c.want)
			}
			for k, v := range c.want {
				if string(got[k]) != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
	// A URI parses back to the login, whatever a password holds.
	got := render(newConnection(&v1.PostgresConnection{Host: "h", DBName: "d"}), "u", "p@ss:w/rd?")
	u, err := url.Parse(string(got["uri"]))
	if pw, _ := u.User.Password(); err != nil || pw != "p@ss:w/rd?" || u.User.Username() != "u" {
		t.Fatalf("uri %q does not parse back to the login", got["uri"])
	}
	if string(got["pgpass"]) != `h:5432:d:u:p@ss\:w/rd?`+"\n" {
		t.Fatalf("pgpass %q: a : in the password must be escaped", got["pgpass"])
	}
}

func keysOf(m map[string][]byte) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	return k
}

func TestGenerationOf(t *testing.T) {
	for _, c := range []struct {
		role string
		gen  int64
		ok   bool
	}{
		{"app_g1", 1, true}, {"app_g12", 12, true}, {"app_g0", 0, false}, {"app_g01", 0, false},
		{"app_g", 0, false}, {"app_gx", 0, false}, {"app", 0, false}, {"apps_g1", 0, false}, {"app_g1_g2", 0, false},
	} {
		gen, ok := generationOf("app", c.role)
		if gen != c.gen || ok != c.ok {
			t.Errorf("generationOf(app, %q) = %d, %v; want %d, %v", c.role, gen, ok, c.gen, c.ok)
		}
	}
}

func TestChecks(t *testing.T) {
	for _, c := range []struct {
		base, group string
		bad         string // "" when accepted; else a word of the error
	}{
		{"app", "app_owner", ""},
		{"App", "app_owner", "login.base"},
		{"app_g2", "app_owner", "login.base"},
		{"app", "pg_monitor", "login.group"},
		{"app", "app_g3", "login.group"},
		{"app", "app", "login.group"},
		{"app", `a"b`, "login.group"},
	} {
		err := checkBase(c.base)
		if err == nil {
			err = checkGroup(c.group, c.base)
		}
		if (err == nil) != (c.bad == "") || (err != nil && !strings.Contains(err.Error(), c.bad)) {
			t.Errorf("base %q group %q: %v, want %q", c.base, c.group, err, c.bad)
		}
	}
}

func TestVerifierRefusesWhatItCannotHash(t *testing.T) {
	for _, c := range []struct{ enc, pw, want string }{
		{"scram-sha-256", "pässword", "printable ASCII"},
		{"scram-sha-256", "", "printable ASCII"},
		{"password", "pw", "password_encryption"},
	} {
		if _, err := verifier(c.enc, "u", c.pw, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("verifier(%s, %q): %v, want an error about %s", c.enc, c.pw, err, c.want)
		}
	}
	v, err := verifier("scram-sha-256", "u", "pw", nil)
	if err != nil || !strings.HasPrefix(v, "SCRAM-SHA-256$4096:") || strings.Contains(v, "pw:") {
		t.Fatalf("verifier %q: %v", v, err)
	}
}

func TestLiteralRefusesQuotes(t *testing.T) {
	for _, s := range []string{"a'b", `a\b`, "a\nb"} {
		if _, err := literal(s); err == nil {
			t.Errorf("literal(%q) accepted", s)
		}
	}
	if l, err := literal("rekey.io/owner=x"); err != nil || l != "'rekey.io/owner=x'" {
		t.Errorf("literal: %q, %v", l, err)
	}
}

func TestInsecureTransport(t *testing.T) {
	for _, c := range []struct{ mode, want string }{
		{"", ""}, {"VerifyFull", ""},
		{"Require", "not verified"}, {"Disable", "unencrypted"},
	} {
		b, err := New(&v1.PostgresSpec{Hosts: []string{"db:5432"}, TLS: c.mode, Login: v1.PostgresLogin{Base: "app", Group: "app_owner"}},
			testUID, "admin", "admin-password", nil)
		if err != nil {
			t.Fatal(err)
		}
		got := b.InsecureTransport()
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) || strings.Contains(got, "admin-password") {
			t.Errorf("tls %q: %q, want %q", c.mode, got, c.want)
		}
	}
}
