package e2e

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestAdmissionMySQLTransportAndGrants: the API server refuses the MySQL
// TLS fields where they would be ignored, server names and service names
// that are not DNS names, and privilege lists that could smuggle the grant
// option or another clause; each message names the field to fix. Verified
// TLS is what a set gets when it says nothing.
func TestAdmissionMySQLTransportAndGrants(t *testing.T) {
	ns := newNamespace(t)
	good := func() *v1.CredentialSet {
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "tls-"},
			Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{
				Instances:      v1.MySQLInstances{Hosts: []string{"db-0.example:3306"}},
				Admin:          v1.MySQLAdmin{User: "admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "a", Key: "p"}},
				Users:          []v1.MySQLUser{{Name: "app", Grants: []v1.MySQLGrant{{Privileges: []string{"SELECT", "SHOW VIEW", "BACKUP_ADMIN"}, Object: "app.*"}}}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "mysql-ca", Key: "ca.crt"},
				TLSServerName:  "mysql.example.internal",
			}},
		}
	}
	grant := func(privs ...string) func(*v1.CredentialSet) {
		return func(cs *v1.CredentialSet) { cs.Spec.MySQL.Users[0].Grants[0].Privileges = privs }
	}
	cases := []struct {
		name   string
		mutate func(*v1.CredentialSet)
		want   string
	}{
		{"a CA with SkipVerify", func(cs *v1.CredentialSet) { cs.Spec.MySQL.TLS = "SkipVerify"; cs.Spec.MySQL.TLSServerName = "" },
			"spec.mysql.tlsCASecretRef: Invalid value"},
		{"a CA with Disabled", func(cs *v1.CredentialSet) { cs.Spec.MySQL.TLS = "Disabled"; cs.Spec.MySQL.TLSServerName = "" },
			"only tls: Required does: remove tlsCASecretRef or set mysql.tls to Required"},
		{"a server name with Preferred", func(cs *v1.CredentialSet) { cs.Spec.MySQL.TLS = "Preferred"; cs.Spec.MySQL.TLSCASecretRef = nil },
			"spec.mysql.tlsServerName: Invalid value"},
		{"an unknown mode", func(cs *v1.CredentialSet) { cs.Spec.MySQL.TLS = "true" },
			`supported values: "Required", "SkipVerify", "Preferred", "Disabled"`},
		{"a server name that is not a DNS name", func(cs *v1.CredentialSet) { cs.Spec.MySQL.TLSServerName = "db:3306/x" },
			"spec.mysql.tlsServerName"},
		{"a CA reference with a bad key", func(cs *v1.CredentialSet) { cs.Spec.MySQL.TLSCASecretRef.Key = "../ca" },
			"spec.mysql.tlsCASecretRef.key"},
		{"a service name that smuggles a DSN", func(cs *v1.CredentialSet) {
			cs.Spec.MySQL.Instances = v1.MySQLInstances{StatefulSet: &v1.StatefulSetInstances{Name: "db", ServiceName: "db)/?allowAllFiles=true"}}
		}, "spec.mysql.instances.statefulSet.serviceName"},
		{"GRANT OPTION as a privilege", grant("SELECT", "GRANT OPTION"), "spec.mysql.users[0].grants[0].privileges[1]"},
		{"ALL ... WITH GRANT OPTION in one item", grant("ALL PRIVILEGES WITH GRANT OPTION"), "spec.mysql.users[0].grants[0].privileges[0]"},
		{"a statement after a privilege", grant("SELECT; DROP USER root"), "spec.mysql.users[0].grants[0].privileges[0]"},
		{"two privileges in one item", grant("SELECT, INSERT"), "spec.mysql.users[0].grants[0].privileges[0]"},
		{"a column list", grant("SELECT (password)"), "spec.mysql.users[0].grants[0].privileges[0]"},
		{"a free phrase", grant("SELECT ON MYSQL"), "spec.mysql.users[0].grants[0].privileges[0]"},
		{"deletionPolicy Delete with the moco preset", func(cs *v1.CredentialSet) {
			cs.Spec.MySQL.Preset, cs.Spec.DeletionPolicy = "moco", v1.DeletionDelete
		}, "deletionPolicy Delete would drop the MySQL system users the cluster itself logs in with (mysql.moco, mysql.preset): use Discard"},
		{"an unknown deletionPolicy", func(cs *v1.CredentialSet) { cs.Spec.DeletionPolicy = "Purge" },
			`supported values: "Discard", "Delete", "Retain"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := good()
			c.mutate(cs)
			err := k8s.Create(ctxT(t), cs)
			if err == nil {
				t.Fatalf("admitted: %+v", cs.Spec.MySQL)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("rejected with %q, want a message containing %q", err, c.want)
			}
		})
	}

	// The well-formed spec is admitted (the cases fail for their reason
	// only), as are the explicit opt-outs without CA or server name.
	for _, mode := range []string{"", "Required", "SkipVerify", "Preferred", "Disabled"} {
		cs := good()
		cs.Spec.MySQL.TLS = mode
		if mode != "" && mode != "Required" {
			cs.Spec.MySQL.TLSCASecretRef, cs.Spec.MySQL.TLSServerName = nil, ""
		}
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatalf("tls %q rejected: %v", mode, err)
		}
		if mode == "" && cs.Spec.MySQL.TLS != "Required" {
			t.Fatalf("tls defaulted to %q, want Required (verified)", cs.Spec.MySQL.TLS)
		}
	}
	// MOCO's grants, every multi-word privilege included, are admitted.
	cs := good()
	cs.Spec.MySQL.Users[0].Grants = []v1.MySQLGrant{{Privileges: []string{"ALL PRIVILEGES", "ALTER ROUTINE", "CREATE ROLE", "CREATE ROUTINE",
		"CREATE TABLESPACE", "CREATE TEMPORARY TABLES", "CREATE USER", "CREATE VIEW", "DROP ROLE", "LOCK TABLES",
		"REPLICATION CLIENT", "REPLICATION SLAVE", "SHOW DATABASES", "SHOW VIEW", "SERVICE_CONNECTION_ADMIN"}, Object: "*.*", WithGrantOption: true}}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatalf("multi-word privileges rejected: %v", err)
	}
}

// TestAdmissionMySQLPasswordLength: passwordLength never goes below the
// strength floor nor above the ceiling, and never above 32 for a user a
// replica may use as its source user, since MySQL refuses a longer
// replication password; each refusal says what to set.
func TestAdmissionMySQLPasswordLength(t *testing.T) {
	ns := newNamespace(t)
	set := func(u v1.MySQLUser) *v1.CredentialSet {
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "pwlen-"},
			Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{Hosts: []string{"db-0.example:3306"}},
				Admin:     v1.MySQLAdmin{User: "admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "a", Key: "p"}},
				Users:     []v1.MySQLUser{u},
			}},
		}
	}
	grants := func(object string, privs ...string) []v1.MySQLGrant {
		return []v1.MySQLGrant{{Object: object, Privileges: privs}}
	}
	const replication = "MySQL refuses a replication password longer than 32 characters: set passwordLength to 32 or remove it (the default is 32 characters, 190 bits)"
	for _, c := range []struct {
		name string
		user v1.MySQLUser
		want string // "" when admitted
	}{
		{"below the floor", v1.MySQLUser{Name: "app", PasswordLength: 31}, "spec.mysql.users[0].passwordLength: Invalid value: 31: spec.mysql.users[0].passwordLength in body should be greater than or equal to 32"},
		{"above the ceiling", v1.MySQLUser{Name: "app", PasswordLength: 129}, "should be less than or equal to 128"},
		{"MOCO's replication user, longer", v1.MySQLUser{Name: "moco-repl", PasswordLength: 33}, "spec.mysql.users[0].passwordLength: Invalid value"},
		{"MOCO's replication user, longer (why)", v1.MySQLUser{Name: "moco-repl", PasswordLength: 33}, replication},
		{"granted REPLICATION SLAVE, 40", v1.MySQLUser{Name: "feed", PasswordLength: 40, Grants: grants("*.*", "REPLICATION CLIENT", "REPLICATION SLAVE")}, replication},
		{"ALL PRIVILEGES on *.*, 64", v1.MySQLUser{Name: "ops", PasswordLength: 64, Grants: grants("*.*", "ALL PRIVILEGES")}, replication},
		{"granted REPLICATION SLAVE, 32", v1.MySQLUser{Name: "feed", PasswordLength: 32, Grants: grants("*.*", "REPLICATION SLAVE")}, ""},
		{"MOCO's replication user, default", v1.MySQLUser{Name: "moco-repl"}, ""},
		{"ALL PRIVILEGES on one schema, 64", v1.MySQLUser{Name: "owner", PasswordLength: 64, Grants: grants("app.*", "ALL PRIVILEGES")}, ""},
		{"an application user, the ceiling", v1.MySQLUser{Name: "app", PasswordLength: 128, Grants: grants("app.*", "SELECT")}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := k8s.Create(ctxT(t), set(c.user))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("admitted: %+v", c.user)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("rejected with %q, want a message containing %q", err, c.want)
			}
		})
	}
}
