package mysql

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// clashSpec is a MySQL spec connecting as admin and rotating users, each
// "name" or "name@host".
func clashSpec(admin string, users ...string) *v1.MySQLSpec {
	s := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: admin}}
	for _, u := range users {
		name, host, _ := strings.Cut(u, "@")
		s.Users = append(s.Users, v1.MySQLUser{Name: name, Host: host})
	}
	return s
}

// Two sets on the same instances clash when they rotate an account of the
// same user name: the same account (one secondary password each), or the
// same name on another host (MySQL picks the most specific host).
func TestClash(t *testing.T) {
	preset := func(admin string, users ...string) *v1.MySQLSpec {
		s := clashSpec(admin, users...)
		s.Preset = "moco"
		return s
	}
	mocoSet := func(cluster string) *v1.MySQLSpec {
		return &v1.MySQLSpec{MOCO: &v1.MOCOSpec{ClusterName: cluster}}
	}
	for _, tc := range []struct {
		name string
		a, b *v1.MySQLSpec
		want []string // nil for no clash, else parts of the description
	}{
		{"same user, default host", clashSpec("ops", "app"), clashSpec("ops", "other", "app"), []string{"user app@%", "Remove app@% from spec.mysql.users"}},
		{"same user, host written in another case", clashSpec("ops", "app@DB.example"), clashSpec("ops", "app@db.example"), []string{"user app@db.example too", "spec.mysql.users"}},
		{"same name on another host", clashSpec("ops", "app@%"), clashSpec("ops", "app@10.%"), []string{"user app@%, and this set user app@10.%", "most specific host", "Remove app@10.% from spec.mysql.users"}},
		{"other users", clashSpec("ops", "app", "web"), clashSpec("ops", "batch"), nil},
		{"user names differ in case only", clashSpec("ops", "app"), clashSpec("ops", "App"), nil},
		{"the moco preset twice", preset("moco-admin"), preset("moco-admin"), []string{"user moco-admin@%", "The moco preset (spec.mysql.preset)"}},
		{"a user of the preset listed by the other", preset("moco-admin"), clashSpec("ops", "moco-writable"), []string{"user moco-writable@%", "Remove moco-writable@% from spec.mysql.users"}},
		{"a moco set and a preset set", mocoSet("shop"), preset("moco-admin"), []string{"user moco-admin@%", "moco preset"}},
		{"two moco sets", mocoSet("shop"), mocoSet("shop"), []string{"user moco-admin@%", "MySQLCluster's system users rotate in one set"}},
		{"a moco set and an application user", mocoSet("shop"), clashSpec("ops", "app"), nil},
		{"a spec whose users do not resolve", clashSpec("ops", "app"), clashSpec("ops"), nil},
		{"no spec", nil, clashSpec("ops", "app"), nil},
	} {
		got := Clash(tc.a, tc.b)
		if (got == "") != (tc.want == nil) {
			t.Errorf("%s: Clash = %q, want a clash: %v", tc.name, got, tc.want != nil)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: Clash = %q, want it to say %q", tc.name, got, w)
			}
		}
	}
}

// TestAdminClash: a set rotating the user another set on the same
// instances connects as, while that set does not rotate it, leaves that
// set unable to log in.
func TestAdminClash(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b *v1.MySQLSpec
		want []string
	}{
		{"b rotates a's admin", clashSpec("root", "app"), clashSpec("ops", "root"), []string{"it connects as root", "rotates as user root@%", "Remove root@% from spec.mysql.users"}},
		{"b rotates a's admin on another host", clashSpec("root", "app"), clashSpec("ops", "root@10.%"), []string{"rotates as user root@10.%"}},
		{"a rotates b's admin", clashSpec("ops", "root"), clashSpec("root", "app"), []string{"it rotates user root@%", "this set connects as root", "Connect as another user in spec.mysql.admin"}},
		{"a rotates its own admin, which b connects as too", clashSpec("root", "root", "app"), clashSpec("root", "web"), []string{"this set connects as root"}},
		{"both connect as one admin, neither rotates it", clashSpec("root", "app"), clashSpec("root", "web"), nil},
		{"each rotates its own admin only", clashSpec("root", "root", "app"), clashSpec("ops", "ops", "web"), nil},
		{"both rotate the admin: a clash of users", clashSpec("root", "root"), clashSpec("ops", "root"), nil},
		{"a moco set rotates the other's admin moco-admin", &v1.MySQLSpec{MOCO: &v1.MOCOSpec{ClusterName: "shop"}}, clashSpec("moco-admin", "app"), []string{"it rotates user moco-admin@%", "this set connects as moco-admin"}},
		{"no spec", nil, clashSpec("root", "root"), nil},
	} {
		got := AdminClash(tc.a, tc.b)
		if (got == "") != (tc.want == nil) {
			t.Errorf("%s: AdminClash = %q, want a clash: %v", tc.name, got, tc.want != nil)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: AdminClash = %q, want it to say %q", tc.name, got, w)
			}
		}
	}
}
