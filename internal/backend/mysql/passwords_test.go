package mysql

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestPasswordLength(t *testing.T) {
	for _, tc := range []struct {
		name        string
		override    int
		replication bool
		want        int
		wantErr     string
	}{
		{"default", 0, false, 32, ""},
		{"default for a replication user", 0, true, 32, ""},
		{"longer on request", 64, false, 64, ""},
		{"the ceiling", 128, false, 128, ""},
		{"replication user at its limit", 32, true, 32, ""},
		{"replication user asked longer", 33, true, 0, "longer than 32 characters: set passwordLength to 32 or remove it"},
		{"below the floor", 31, false, 0, "use 32 (190 bits) to 128"},
		{"above the ceiling", 129, false, 0, "use 32 (190 bits) to 128"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := passwordLength(tc.override, tc.replication)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestMayReplicate(t *testing.T) {
	g := func(object string, privs ...string) []v1.MySQLGrant {
		return []v1.MySQLGrant{{Object: object, Privileges: privs}}
	}
	for _, tc := range []struct {
		name   string
		user   string
		grants []v1.MySQLGrant
		want   bool
	}{
		{"MOCO's replication user, whatever its grants", "moco-repl", nil, true},
		{"granted REPLICATION SLAVE", "repl", g("*.*", "REPLICATION CLIENT", "REPLICATION SLAVE"), true},
		{"ALL PRIVILEGES on *.* includes it", "root2", g("*.*", "ALL PRIVILEGES"), true},
		{"ALL PRIVILEGES on one schema does not", "app", g("app.*", "ALL PRIVILEGES"), false},
		{"REPLICATION CLIENT alone does not", "monitor", g("*.*", "REPLICATION CLIENT", "PROCESS"), false},
		{"no grants", "app", nil, false},
	} {
		if got := mayReplicate(tc.user, tc.grants); got != tc.want {
			t.Errorf("%s: mayReplicate = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// What reaches generation: the preset's users (moco-repl among them) get
// the default, an override lengthens one user only, and a replication
// user asked longer than MySQL accepts stops the backend being built.
func TestGeneratedPasswordLengths(t *testing.T) {
	spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: "moco-admin"}, Preset: "moco", Users: []v1.MySQLUser{
		{Name: "app", PasswordLength: 64},
		{Name: "repl", Grants: []v1.MySQLGrant{{Object: "*.*", Privileges: []string{"REPLICATION SLAVE"}}}},
	}}
	b, err := New(spec, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.NewSecrets(2)
	if err != nil {
		t.Fatal(err)
	}
	for k, p := range s {
		want := 32
		if k == "APP_PASSWORD" {
			want = 64
		}
		if len(p) != want {
			t.Errorf("%s: %d characters, want %d", k, len(p), want)
		}
	}
	if len(s) != 10 || len(s["REPLICATION_PASSWORD"]) != 32 {
		t.Fatalf("%d passwords, REPLICATION_PASSWORD of %d characters; want 10 and 32", len(s), len(s["REPLICATION_PASSWORD"]))
	}
	spec.Users[1].PasswordLength = 40
	if _, err := New(spec, nil, "", nil); err == nil || !strings.Contains(err.Error(), "user repl: passwordLength 40") {
		t.Fatalf("a 40-character replication password: err = %v, want a refusal naming user repl", err)
	}
}

func TestTooLongForReplication(t *testing.T) {
	long := User{Name: "feed", Host: "%", Key: "FEED_PASSWORD", PasswordLength: 48}
	short := User{Name: "repl", Host: "%", Key: "REPL_PASSWORD", PasswordLength: 32}
	app := User{Name: "app", Host: "%", Key: "APP_PASSWORD", PasswordLength: 64}
	users := []User{long, short, app}
	replicaAs := func(name string, users ...string) observation {
		o := observation{Name: name}
		for _, u := range users {
			o.Channels = append(o.Channels, channel{SourceUser: u})
		}
		return o
	}
	noReplica := []observation{replicaAs("db-0"), replicaAs("db-1")}
	for _, tc := range []struct {
		name    string
		granted map[string][]string
		obs     []observation
		want    []string
	}{
		{"granted REPLICATION SLAVE outside the spec", map[string][]string{"feed@%": {"db-1", "db-0"}, "repl@%": {"db-0"}}, noReplica,
			[]string{"feed@% (passwordLength 48): granted REPLICATION SLAVE on db-0, db-1"}},
		{"a replica logs in as it (a role's grant)", nil, []observation{replicaAs("db-0"), replicaAs("db-1", "feed")},
			[]string{"feed@% (passwordLength 48): db-1 replicates as it"}},
		{"both", map[string][]string{"feed@%": {"db-0"}}, []observation{replicaAs("db-0"), replicaAs("db-1", "feed")},
			[]string{"feed@% (passwordLength 48): db-1 replicates as it; granted REPLICATION SLAVE on db-0"}},
		{"only short passwords may replicate", map[string][]string{"repl@%": {"db-0"}}, []observation{replicaAs("db-1", "repl"), replicaAs("db-2", "other")}, nil},
		{"long passwords, nobody may replicate", nil, noReplica, nil},
	} {
		got := tooLongForReplication(users, tc.granted, tc.obs)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}

	if replicationRefusal(nil) != nil {
		t.Fatal("a refusal with nothing to refuse")
	}
	rf := replicationRefusal([]string{"feed@% (passwordLength 48): db-1 replicates as it", "relay@% (passwordLength 64): granted REPLICATION SLAVE on db-0"})
	for _, want := range []string{"did not start: feed@% (passwordLength 48): db-1 replicates as it. relay@% (passwordLength 64)", "longer than 32 characters", "Set passwordLength to 32 or remove it", "190 bits"} {
		if rf == nil || rf.Reason != "RotateRefused" || !strings.Contains(rf.Message, want) {
			t.Fatalf("refusal %+v lacks %q", rf, want)
		}
	}
}
