package postgreskube

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
)

func pgSet(logins ...v1.PostgresLogin) *v1.CredentialSet {
	spec := &v1.PostgresSpec{Hosts: []string{"db:5432"}}
	if len(logins) == 1 {
		spec.Login = logins[0]
	} else {
		spec.Logins = logins
	}
	return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: v1.CredentialSetSpec{Postgres: spec}}
}

// TestShowPicksALogin: show reads one login's keys: the only one of a
// login set, the one --user names of a logins set.
func TestShowPicksALogin(t *testing.T) {
	app := v1.PostgresLogin{Base: "app", Group: "owner"}
	rep := v1.PostgresLogin{Base: "report", Group: "reader"}
	for _, c := range []struct {
		name string
		cs   *v1.CredentialSet
		pick registry.Pick
		keys string // the keys read, or the error's part
	}{
		{"login", pgSet(app), registry.Pick{Format: "env"}, "username,password"},
		{"login with --user", pgSet(app), registry.Pick{Identity: "app"}, "takes no --user"},
		{"logins, one named", pgSet(app, rep), registry.Pick{Identity: "report", Format: "env"}, "report.username,report.password"},
		{"logins, the password", pgSet(app, rep), registry.Pick{Identity: "app", Format: "plain"}, "app.password"},
		{"logins, none named", pgSet(app, rep), registry.Pick{}, "name one with --user (app or report)"},
		{"logins, an unknown one", pgSet(app, rep), registry.Pick{Identity: "web"}, "name one with --user"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := credential(c.cs, c.pick)
			if err != nil {
				if !strings.Contains(err.Error(), c.keys) {
					t.Fatalf("error %q, want %q", err, c.keys)
				}
				return
			}
			if k := strings.Join(got.Keys, ","); k != c.keys {
				t.Fatalf("reads %s, want %s", k, c.keys)
			}
		})
	}
}

// TestLoginChoices: --user's choices, as show's refusal of another
// backend's flag lists them: none for a login set, whose one login show
// prints without --user.
func TestLoginChoices(t *testing.T) {
	app := v1.PostgresLogin{Base: "app", Group: "owner"}
	rep := v1.PostgresLogin{Base: "report", Group: "reader"}
	if got := loginChoices(pgSet(app)); len(got) != 0 {
		t.Errorf("a login set: choices %v, want none", got)
	}
	if got := strings.Join(loginChoices(pgSet(app, rep)), ","); got != "app,report" {
		t.Errorf("a logins set: choices %s, want app,report", got)
	}
}

func TestRenderedKeys(t *testing.T) {
	one := pgSet(v1.PostgresLogin{Base: "app", Group: "owner"})
	two := pgSet(v1.PostgresLogin{Base: "app", Group: "owner"}, v1.PostgresLogin{Base: "report", Group: "reader"})
	if got := renderedKeys(one); got != "username, password" {
		t.Errorf("one login: %q", got)
	}
	if got := renderedKeys(two); !strings.Contains(got, "app.username, app.password") {
		t.Errorf("two logins: %q", got)
	}
}
