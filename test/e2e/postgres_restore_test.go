package e2e

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestPostgresRestoredGeneration is TestRabbitMQRestoredGeneration's
// PostgreSQL form, on a real primary and replica with consumer pods that
// read their Secret at start: the set's status and source Secret restored
// from before a rotation its pods moved to, the server has a login role of
// that rotation (rest_g2) the status does not account for. The next
// rotation and the deletion's wind-down would have dropped it or given it
// a new password; both are refused (DualPasswordExists, naming recover)
// with every role as it was, and recover restarts the pods onto the
// current login, drops rest_g2, and the deletion completes. No pod login
// is refused.
func TestPostgresRestoredGeneration(t *testing.T) {
	p := pgMatrixCluster(t)
	if err := p.Exec(p.Primary, "CREATE ROLE app_owner NOLOGIN", "GRANT CREATE ON SCHEMA public TO app_owner"); err != nil {
		t.Fatal(err)
	}
	startManager(t, cp.Config)
	ns := newNamespace(t)
	createSecret(t, ns, "pg-admin", map[string]string{"username": p.AdminUser, "password": p.AdminPassword})
	createSecret(t, ns, "pg-ca", map[string]string{"ca.crt": string(p.CAPEM)})
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rest"},
		Spec: v1.CredentialSetSpec{
			Postgres: &v1.PostgresSpec{
				Hosts:          []string{p.Primary.Addr(), p.Replica.Addr()},
				Admin:          v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "pg-ca", Key: "ca.crt"},
				Logins:         []v1.PostgresLogin{{Base: "rest", Group: "app_owner"}},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "rest-db"}},
			Rotation:     v1.RotationSpec{DiscardPolicy: v1.DiscardManual},
		},
	}
	pc := deployConsumersWay(t, cs, pgWay(p, "rest"))
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "rest", v1.PhaseIdle, 1)
	backupStatus, backupSource := *cs.Status.DeepCopy(), maps.Clone(sourceData(t, cs))
	rotate(t, ns, "rest", "r1")
	waitRolledOut(t, ns, "rest")
	restoreSet(t, ns, "rest", backupStatus, backupSource)
	observed(t, "status and source Secret restored from before r1, the pods logging in as rest_g2")
	both := []string{"rest_g1", "rest_g2"}
	roles := func(when string) {
		t.Helper()
		for _, r := range both {
			if !pgRoleExists(t, p, r) {
				t.Fatalf("%s: role %s is gone", when, r)
			}
		}
	}

	rotate(t, ns, "rest", "r2")
	mustContain(t, "DualPasswordExists event", waitEventNoting(t, ns, "rest", reason.DualPasswordExists, "rest_g2"), "kubectl rekey recover")
	roles("after the refused rotation")
	if err := k8s.Delete(ctxT(t), getSet(t, ns, "rest")); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "DualPasswordExists event of the deleted set", waitEventNoting(t, ns, "rest", reason.DualPasswordExists, "the set is deleted"), "kubectl rekey recover")
	roles("while the deletion is held")
	observed(t, "the rotation and the deletion refused, both roles kept")

	annotate(t, ns, "rest", engine.RecoverAnnotation, "c1")
	waitSetGone(t, ns, "rest")
	if pgRoleExists(t, p, "rest_g2") || !pgRoleExists(t, p, "rest_g1") {
		t.Fatal("after recover and the wind-down the server must keep rest_g1 alone")
	}
	assertNoRefusals(t, pc)
}

// pgRoleExists: the primary has the role.
func pgRoleExists(t *testing.T, p *testenv.Postgres, role string) bool {
	t.Helper()
	ok, err := p.RoleExists(role)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
