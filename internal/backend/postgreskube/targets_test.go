package postgreskube

import (
	"maps"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
)

// TestTargetCarriesOneLogin: through the registry (as the controller and
// the plugin reach it), a target naming a login holds that login's keys
// without its base's prefix, in the layout an application of one login
// reads; a target without login holds every key; a login the set does
// not have is refused, naming the set's.
func TestTargetCarriesOneLogin(t *testing.T) {
	app := v1.PostgresLogin{Base: "app", Group: "owner"}
	rep := v1.PostgresLogin{Base: "report", Group: "reader"}
	several := pgSet(app, rep)
	native := map[string][]byte{
		"app.username": []byte("app_g3"), "app.password": []byte("a"), "app.uri": []byte("postgresql://app_g3:a@db:5432/shop"),
		"report.username": []byte("report_g3"), "report.password": []byte("r"), "report.uri": []byte("postgresql://report_g3:r@db:5432/shop"),
	}
	one := pgSet(app)
	oneNative := map[string][]byte{"username": []byte("app_g3"), "password": []byte("a")}
	for _, c := range []struct {
		name  string
		cs    *v1.CredentialSet
		login string
		in    map[string][]byte
		want  map[string][]byte
	}{
		{"no login: every key", several, "", native, native},
		{"one of several", several, "report", native, map[string][]byte{
			"username": []byte("report_g3"), "password": []byte("r"), "uri": []byte("postgresql://report_g3:r@db:5432/shop")}},
		{"the other", several, "app", native, map[string][]byte{
			"username": []byte("app_g3"), "password": []byte("a"), "uri": []byte("postgresql://app_g3:a@db:5432/shop")}},
		{"the only login, named", one, "app", oneNative, oneNative},
	} {
		tg := v1.SecretTarget{Namespace: "shop", Name: "db", Login: c.login}
		if err := registry.CheckTarget(c.cs, tg); err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
		}
		got, err := registry.TargetData(c.cs, tg, c.in)
		if err != nil || !maps.EqualFunc(got, c.want, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("%s: holds %q (%v), want %q", c.name, got, err, c.want)
		}
		if registry.NamesOne(c.cs, tg) != (c.login != "") {
			t.Errorf("%s: NamesOne = %v", c.name, !(c.login != ""))
		}
	}
	if k, ok := registry.TargetKey(several, v1.SecretTarget{Login: "report"}, "app.password"); ok {
		t.Errorf("a report target holds app's password as %q", k)
	}
	for _, c := range []struct {
		cs    *v1.CredentialSet
		login string
		want  string
	}{
		{several, "billing", `distribution target shop/db: login "billing" is not a login of this set: name one of app, report`},
		{one, "report", `login "report" is not a login of this set: name one of app`},
	} {
		err := registry.CheckTarget(c.cs, v1.SecretTarget{Namespace: "shop", Name: "db", Login: c.login})
		if _, spec := err.(*registry.SpecError); !spec || !strings.Contains(err.Error(), c.want) {
			t.Errorf("login %s: %v, want a spec error containing %q", c.login, err, c.want)
		}
	}
	conn := pgSet(app, rep)
	conn.Spec.Postgres.Connection = &v1.PostgresConnection{Host: "db", DBName: "shop"}
	if got, want := registry.TargetNote(conn, v1.SecretTarget{Login: "report"}), " (login report only: username, password, host, port, dbname, uri, jdbc-uri, pgpass (CloudNativePG's application Secret layout))"; got != want {
		t.Errorf("note %q, want %q", got, want)
	}
}
