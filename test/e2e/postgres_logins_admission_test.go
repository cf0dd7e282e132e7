package e2e

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestAdmissionPostgresLogins: the API server refuses malformed
// spec.postgres.logins, each with a message naming what to fix, and
// admits a set with several logins and the sets written with login before
// logins existed.
func TestAdmissionPostgresLogins(t *testing.T) {
	ns := newNamespace(t)
	pg := func() *v1.CredentialSet {
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "pg-"},
			Spec: v1.CredentialSetSpec{Postgres: &v1.PostgresSpec{
				Hosts:  []string{"app-1.app.team.svc:5432", "app-2.app.team.svc:5432"},
				Admin:  v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
				Logins: []v1.PostgresLogin{{Base: "app", Group: "app_owner"}, {Base: "report", Group: "report_reader"}},
			}},
		}
	}
	adopt := func(role string) *v1.PostgresAdopt {
		return &v1.PostgresAdopt{Role: role, PasswordSecretRef: v1.SecretKeyRef{Name: "legacy", Key: role}}
	}
	many := func(n int) []v1.PostgresLogin {
		var l []v1.PostgresLogin
		for i := range n {
			l = append(l, v1.PostgresLogin{Base: fmt.Sprintf("l%d", i), Group: "owner"})
		}
		return l
	}
	for _, c := range []struct {
		name   string
		mutate func(*v1.CredentialSet)
		want   []string
	}{
		{"login and logins", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Login = v1.PostgresLogin{Base: "web", Group: "web_owner"} },
			[]string{"spec.postgres", "set exactly one of them"}},
		{"neither", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Logins = nil }, []string{"spec.postgres.login", "spec.postgres.logins"}},
		{"seventeen logins", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Logins = many(17) }, []string{"spec.postgres.logins", "16"}},
		{"a base listed twice", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Logins[1].Base = "app" }, []string{"spec.postgres.logins[1]", "Duplicate"}},
		{"a group that is another login's base", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Logins[1].Group = "app" },
			[]string{"spec.postgres.logins", "has the base of a login"}},
		{"a group named like another login's generation", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Logins[1].Group = "app_g7" },
			[]string{"spec.postgres.logins", "named like a generation"}},
		{"a base ending like a generation", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Logins[1].Base = "report_g2" },
			[]string{"spec.postgres.logins[1].base", "_g<number>"}},
		{"a base too long", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Logins[1].Base = strings.Repeat("r", 51) },
			[]string{"spec.postgres.logins[1].base", "50"}},
		{"a pg_ group", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Logins[0].Group = "pg_read_server_files" },
			[]string{"spec.postgres.logins[0].group", "PostgreSQL's own"}},
		{"spec.postgres.adopt with logins", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Adopt = adopt("legacy") },
			[]string{"spec.postgres.adopt", "move adopt into the item"}},
		{"login.adopt", func(cs *v1.CredentialSet) {
			cs.Spec.Postgres.Logins, cs.Spec.Postgres.Login = nil, v1.PostgresLogin{Base: "app", Group: "app_owner", Adopt: adopt("legacy")}
		}, []string{"spec.postgres.login.adopt", "spec.postgres.adopt"}},
		{"a login adopting a group", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Logins[1].Adopt = adopt("app_owner") },
			[]string{"spec.postgres.logins", "adopt.role is a group"}},
		{"a login adopting another's generation", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Logins[1].Adopt = adopt("app_g2") },
			[]string{"spec.postgres.logins", "named like a generation"}},
		{"two logins adopting one role", func(cs *v1.CredentialSet) {
			cs.Spec.Postgres.Logins[0].Adopt, cs.Spec.Postgres.Logins[1].Adopt = adopt("legacy"), adopt("legacy")
		}, []string{"spec.postgres.logins", "adopt the same role"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := pg()
			c.mutate(cs)
			err := k8s.Create(ctxT(t), cs)
			if err == nil {
				t.Fatalf("admitted: %+v", cs.Spec.Postgres)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("rejected with %q, want a message containing %q", err, w)
				}
			}
		})
	}
	one := pg()
	one.Spec.Postgres.Logins = one.Spec.Postgres.Logins[:1]
	sixteen := pg()
	sixteen.Spec.Postgres.Logins = many(16)
	legacy := pg()
	legacy.Spec.Postgres.Logins, legacy.Spec.Postgres.Login = nil, v1.PostgresLogin{Base: "app", Group: "app_owner"}
	legacy.Spec.Postgres.Adopt = &v1.PostgresAdopt{Role: "shop", PasswordSecretRef: v1.SecretKeyRef{Name: "legacy", Key: "password"}}
	sharedGroup := pg()
	sharedGroup.Spec.Postgres.Logins[1].Group = "app_owner"
	adopting := pg()
	adopting.Spec.Postgres.Logins[0].Adopt, adopting.Spec.Postgres.Logins[1].Adopt = adopt("legacy"), adopt("legacy_report")
	for _, cs := range []*v1.CredentialSet{pg(), one, sixteen, legacy, sharedGroup, adopting} {
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Errorf("well-formed spec %+v rejected: %v", cs.Spec.Postgres, err)
		}
	}

	// The logins name the source Secret's keys: a set keeps them.
	for _, c := range []struct {
		name   string
		cs     *v1.CredentialSet
		mutate func(*v1.PostgresSpec)
	}{
		{"a login added", one, func(s *v1.PostgresSpec) { s.Logins = append(s.Logins, v1.PostgresLogin{Base: "extra", Group: "x"}) }},
		{"a login renamed", sharedGroup, func(s *v1.PostgresSpec) { s.Logins[1].Base = "reports" }},
		{"from login to logins", legacy, func(s *v1.PostgresSpec) {
			s.Login, s.Adopt, s.Logins = v1.PostgresLogin{}, nil, []v1.PostgresLogin{{Base: "app", Group: "app_owner"}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := getSet(t, ns, c.cs.Name)
			c.mutate(cs.Spec.Postgres)
			err := k8s.Update(ctxT(t), cs)
			if err == nil || !strings.Contains(err.Error(), "spec.postgres.logins is fixed") || !strings.Contains(err.Error(), "create another CredentialSet") {
				t.Fatalf("updated, or refused without saying what to do: %v", err)
			}
		})
	}
	reordered := getSet(t, ns, sharedGroup.Name)
	l := reordered.Spec.Postgres.Logins
	l[0], l[1] = l[1], l[0]
	l[0].Group = "report_reader"
	if err := k8s.Update(ctxT(t), reordered); err != nil {
		t.Errorf("reordering logins and changing a group refused: %v", err)
	}
}

// TestAdmissionDistributionLogin: a distribution target may carry one
// login (distribution[].login) of a PostgreSQL set, named by its base; the
// API server refuses a login the set does not have, and login on any
// other backend's set, each saying what to do.
func TestAdmissionDistributionLogin(t *testing.T) {
	ns := newNamespace(t)
	pg := func(login string, logins ...string) *v1.CredentialSet {
		cs := &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "pg-"},
			Spec: v1.CredentialSetSpec{Postgres: &v1.PostgresSpec{
				Hosts: []string{"app-1.app.team.svc:5432"},
				Admin: v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
			}, Distribution: []v1.SecretTarget{{Namespace: ns, Name: "all"}, {Namespace: ns, Name: "one", Login: login}}},
		}
		for _, b := range logins {
			cs.Spec.Postgres.Logins = append(cs.Spec.Postgres.Logins, v1.PostgresLogin{Base: b, Group: "owner"})
		}
		if len(logins) == 1 {
			cs.Spec.Postgres.Login, cs.Spec.Postgres.Logins = cs.Spec.Postgres.Logins[0], nil
		}
		return cs
	}
	rabbit := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "mq-"},
		Spec: v1.CredentialSetSpec{
			RabbitMQ:     &v1.RabbitMQSpec{Endpoint: "https://r:15671", Admin: v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "a"}}, User: v1.RabbitMQUser{Base: "n"}},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "mq", Login: "n"}},
		},
	}
	for _, c := range []struct {
		name string
		cs   *v1.CredentialSet
		want []string
	}{
		{"a login the set does not have", pg("billing", "app", "report"), []string{"spec.distribution", "not a login of this set", "spec.postgres.logins"}},
		{"another base than login's", pg("report", "app"), []string{"spec.distribution", "not a login of this set"}},
		{"not a base's shape", pg("App", "app", "report"), []string{"spec.distribution[1].login"}},
		{"a RabbitMQ set", rabbit, []string{"spec.distribution", "for spec.postgres sets only", "remove login"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := k8s.Create(ctxT(t), c.cs)
			if err == nil {
				t.Fatalf("admitted: %+v", c.cs.Spec.Distribution)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("rejected with %q, want a message containing %q", err, w)
				}
			}
		})
	}
	for _, cs := range []*v1.CredentialSet{pg("report", "app", "report"), pg("app", "app", "report"), pg("app", "app")} {
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Errorf("well-formed distribution %+v rejected: %v", cs.Spec.Distribution, err)
		}
	}
}
