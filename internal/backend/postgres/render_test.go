package postgres

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestPgpassField(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a:b", `a\:b`},
		{`a\b`, `a\\b`},
		{`\:`, `\\\:`},
		{"", ""},
	} {
		if got := pgpassField(tc.in); got != tc.want {
			t.Errorf("pgpassField(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTargetKey(t *testing.T) {
	one := &v1.PostgresSpec{Login: v1.PostgresLogin{Base: "app"}}
	several := &v1.PostgresSpec{Logins: []v1.PostgresLogin{{Base: "app"}, {Base: "report"}}}
	for _, tc := range []struct {
		name      string
		spec      *v1.PostgresSpec
		login, k  string
		want      string
		wantFound bool
	}{
		{"one login: its keys as they are", one, "app", "password", "password", true},
		{"one login: another login's target gets nothing", one, "report", "password", "password", false},
		{"several: the login's prefix dropped", several, "app", "app.password", "password", true},
		{"several: another login's key not taken", several, "app", "report.password", "report.password", false},
		{"several: a prefix of a name is not the login", several, "app", "apple.password", "apple.password", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found := TargetKey(tc.spec, tc.login, tc.k)
			if found != tc.wantFound || (found && got != tc.want) {
				t.Fatalf("TargetKey(%q, %q) = %q, %v; want %q, %v", tc.login, tc.k, got, found, tc.want, tc.wantFound)
			}
		})
	}
}
