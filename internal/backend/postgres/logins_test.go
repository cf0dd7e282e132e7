package postgres

import (
	"slices"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

const unitUID = "00000000-0000-0000-0000-0000000000aa"

func twoLogins() *v1.PostgresSpec {
	return &v1.PostgresSpec{Hosts: []string{"db:5432"}, Logins: []v1.PostgresLogin{
		{Base: "app", Group: "app_owner"}, {Base: "report", Group: "report_reader"}}}
}

// TestLoginKeys: a set with login keeps the keys it always had; each of
// logins has its own, after its base.
func TestLoginKeys(t *testing.T) {
	one := &v1.PostgresSpec{Hosts: []string{"db:5432"}, Login: v1.PostgresLogin{Base: "app", Group: "app_owner"}}
	listOfOne := &v1.PostgresSpec{Hosts: []string{"db:5432"}, Logins: []v1.PostgresLogin{{Base: "app", Group: "app_owner"}}}
	for _, c := range []struct {
		name string
		spec *v1.PostgresSpec
		want []string
	}{
		{"login", one, []string{"username", "password"}},
		{"logins of one", listOfOne, []string{"app.username", "app.password"}},
		{"two logins", twoLogins(), []string{"app.username", "app.password", "report.username", "report.password"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := New(c.spec, unitUID, "admin", "pw", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Keys(); !slices.Equal(got, c.want) {
				t.Fatalf("Keys() = %v, want %v", got, c.want)
			}
			s, err := b.NewSecrets(3)
			if err != nil {
				t.Fatal(err)
			}
			if len(s) != len(c.want) {
				t.Fatalf("NewSecrets gives %v, want the keys %v", s.SortedKeys(), c.want)
			}
			for _, l := range c.spec.RotatingLogins() {
				p := Prefix(c.spec, l.Base)
				if s[p+"username"] != l.Base+"_g3" || len(s[p+"password"]) < 32 {
					t.Errorf("generation 3 of %s: %q with a %d-character password", l.Base, s[p+"username"], len(s[p+"password"]))
				}
			}
		})
	}
}

// TestRenderLogins: every login in its layout, under its prefix; a set
// of secrets that lacks one login is not rendered.
func TestRenderLogins(t *testing.T) {
	spec := twoLogins()
	spec.Connection = &v1.PostgresConnection{Host: "app-rw", DBName: "app"}
	b, err := New(spec, unitUID, "admin", "pw", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := engine.Secrets{"app.username": "app_g2", "app.password": "A0", "report.username": "report_g2", "report.password": "R0"}
	got, err := b.Render(s)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"app.username": "app_g2", "app.password": "A0", "app.uri": "postgresql://app_g2:A0@app-rw:5432/app",
		"report.username": "report_g2", "report.pgpass": "app-rw:5432:app:report_g2:R0\n", "report.dbname": "app",
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != 16 {
		t.Errorf("rendered %d keys, want 8 per login: %v", len(got), keysOf(got))
	}
	delete(s, "report.password")
	if _, err := b.Render(s); err == nil || !strings.Contains(err.Error(), "report.password") {
		t.Fatalf("secrets without report.password rendered: %v", err)
	}
}

// TestLoginsRefused: logins that could take each other's roles are
// refused before anything is done, as admission does.
func TestLoginsRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		logins []v1.PostgresLogin
		want   string
	}{
		{"a group named as another base", []v1.PostgresLogin{{Base: "app", Group: "owner"}, {Base: "report", Group: "app"}}, `login.group "app"`},
		{"a group named like another's generation", []v1.PostgresLogin{{Base: "app", Group: "owner"}, {Base: "report", Group: "app_g2"}}, `login.group "app_g2"`},
		{"a base listed twice", []v1.PostgresLogin{{Base: "app", Group: "owner"}, {Base: "app", Group: "other"}}, "listed twice"},
		{"a bad base", []v1.PostgresLogin{{Base: "app", Group: "owner"}, {Base: "Rep", Group: "other"}}, `login.base "Rep"`},
		{"seventeen", func() []v1.PostgresLogin {
			var l []v1.PostgresLogin
			for i := range 17 {
				l = append(l, v1.PostgresLogin{Base: "l" + strings.Repeat("x", i), Group: "owner"})
			}
			return l
		}(), "at most 16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := &v1.PostgresSpec{Hosts: []string{"db:5432"}, Logins: c.logins}
			if _, err := New(spec, unitUID, "admin", "pw", nil); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want an error containing %q", err, c.want)
			}
		})
	}
	adopt := twoLogins()
	adopt.Adopt = &v1.PostgresAdopt{Role: "legacy"}
	if _, err := New(adopt, unitUID, "admin", "pw", nil); err == nil || !strings.Contains(err.Error(), "adopt goes with postgres.login") {
		t.Fatalf("adopt with logins: %v", err)
	}
}

// TestAdoptedRefused: a login adopts only a role rekey may retire: not a
// group, the admin, a generation of the set, nor another login's.
func TestAdoptedRefused(t *testing.T) {
	for _, c := range []struct {
		name      string
		app, rept string // the roles the logins adopt ("" none)
		want      string
	}{
		{"a group", "report_reader", "", "is a group"},
		{"another login's generation", "report_g3", "", "named like one of this set's own generations"},
		{"the admin", "admin", "", "is the admin"},
		{"one role twice", "legacy", "legacy", "adopted by another login too"},
		{"two roles", "legacy", "legacy_report", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := twoLogins()
			for i, role := range []string{c.app, c.rept} {
				if role != "" {
					spec.Logins[i].Adopt = &v1.PostgresAdopt{Role: role}
				}
			}
			b, err := New(spec, unitUID, "admin", "pw", nil)
			if c.want == "" {
				if err != nil || !b.logins[0].adopted("legacy") || !b.logins[1].adopted("legacy_report") || b.logins[0].adopted("legacy_report") {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "spec.postgres.logins[0].adopt") {
				t.Fatalf("New: %v, want an error naming spec.postgres.logins[0].adopt and %q", err, c.want)
			}
		})
	}
}

// TestCheckLoginPerKey: a login's key naming another login's role is
// refused: each login drops only its own generations.
func TestCheckLoginPerKey(t *testing.T) {
	b, err := New(twoLogins(), unitUID, "admin", "pw", nil)
	if err != nil {
		t.Fatal(err)
	}
	ok := engine.Secrets{"app.username": "app_g2", "app.password": "A0", "report.username": "report_g2", "report.password": "R0"}
	if _, err := b.checkedIdentities(ok, "current"); err != nil {
		t.Fatal(err)
	}
	swapped := engine.Secrets{"app.username": "report_g2", "app.password": "A0", "report.username": "app_g2", "report.password": "R0"}
	_, err = b.checkedIdentities(swapped, "current")
	if r, isRefusal := engine.AsRefusal(err); !isRefusal || !strings.Contains(r.Message, "under app.username") {
		t.Fatalf("swapped logins: %v", err)
	}
}
