package e2e

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// The deletion matrix (deletion_matrix_test.go) on a real MySQL cluster,
// broker and PostgreSQL primary and replica (Ceph: deletion_ceph_test.go).

// TestMySQLDeletion: one user per set, rotated with a dual password.
func TestMySQLDeletion(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	prepareAdmin(t, c.Instances(), "ops-admin", "ops-admin-password-for-tests")
	startManager(t, cp.Config)
	tmpl := map[string]*v1.CredentialSet{} // its admin and CA Secrets are made once a namespace
	runDeletionMatrix(t, deletionBackend{
		newSet: func(t testing.TB, ns, name string) *v1.CredentialSet {
			if tmpl[ns] == nil {
				tmpl[ns] = preparedAdminSet(t, ns, name, c)
			}
			cs := tmpl[ns].DeepCopy()
			cs.Name = name
			cs.Spec.MySQL.Users = []v1.MySQLUser{{Name: name}}
			cs.Spec.Distribution = []v1.SecretTarget{{Namespace: ns, Name: name + "-db"}}
			return cs
		},
		creds: func(t testing.TB, data map[string][]byte, suffix string) []cred {
			var out []cred
			for k, v := range data {
				if base, ok := strings.CutSuffix(k, "_PASSWORD"+suffix); ok {
					out = append(out, cred{strings.ToLower(base), string(v)})
				}
			}
			return out
		},
		accepts: func(t testing.TB, u cred) []bool {
			var out []bool
			for _, i := range c.Instances() {
				out = append(out, i.CanLogin(u.user, u.secret) == nil)
			}
			return out
		},
	})
}

// TestRabbitMQDeletion: a user per generation (<base>-g<N>).
func TestRabbitMQDeletion(t *testing.T) {
	m := testenv.RabbitMQForTest(t)
	startManager(t, cp.Config)
	runDeletionMatrix(t, deletionBackend{
		newSet: func(t testing.TB, ns, name string) *v1.CredentialSet { return rabbitSet(t, ns, name, m) },
		creds:  userPasswordCreds,
		accepts: func(t testing.TB, u cred) []bool {
			return []bool{m.CanAuthenticate(u.user, u.secret) == nil}
		},
	})
}

// TestPostgresDeletion: a login role per generation (<base>_g<N>), checked
// on the primary and on the replica.
func TestPostgresDeletion(t *testing.T) {
	p := testenv.PostgresForTest(t)
	if err := p.Exec(p.Primary, "CREATE ROLE del_owner NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	startManager(t, cp.Config)
	runDeletionMatrix(t, deletionBackend{
		newSet: func(t testing.TB, ns, name string) *v1.CredentialSet {
			createSecret(t, ns, name+"-admin", map[string]string{"username": p.AdminUser, "password": p.AdminPassword})
			createSecret(t, ns, name+"-ca", map[string]string{"ca.crt": string(p.CAPEM)})
			return &v1.CredentialSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: v1.CredentialSetSpec{
					Postgres: &v1.PostgresSpec{
						Hosts:          []string{p.Primary.Addr(), p.Replica.Addr()},
						Admin:          v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: name + "-admin"}},
						TLSCASecretRef: &v1.SecretKeyRef{Name: name + "-ca", Key: "ca.crt"},
						Login:          v1.PostgresLogin{Base: name, Group: "del_owner"},
					},
					Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-db"}},
				},
			}
		},
		creds: userPasswordCreds,
		accepts: func(t testing.TB, u cred) []bool {
			var out []bool
			for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
				out = append(out, p.CanLogin(i, u.user, u.secret) == nil)
			}
			return out
		},
	})
}
