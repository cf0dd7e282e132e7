package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// TestPostgresSeveralLogins rotates a set of two logins (the
// application's, which owns the tables through app_owner, and a
// reporting login that reads them through report_reader, whose role
// "reporting" exists and is adopted) on a real primary and streaming
// replica: both get a new role in one rotation, both old ones keep working
// until the discard, which drops both, the adopted one included. Consumers,
// one per login, run pgbench with what they read when they started, on
// both instances, from provisioning to after the discard: not one login is
// refused. Deleted with deletionPolicy Delete, the set drops both current
// logins.
func TestPostgresSeveralLogins(t *testing.T) {
	p := testenv.PostgresForTest(t)
	if err := p.Exec(p.Primary, "CREATE ROLE app_owner NOLOGIN", "GRANT CREATE ON SCHEMA public TO app_owner",
		"CREATE ROLE report_reader NOLOGIN", "CREATE ROLE reporting LOGIN PASSWORD 'Reporting0123456789'"); err != nil {
		t.Fatal(err)
	}
	startManager(t, cp.Config)
	ns := newNamespace(t)
	createSecret(t, ns, "pg-admin", map[string]string{"username": p.AdminUser, "password": p.AdminPassword})
	createSecret(t, ns, "pg-ca", map[string]string{"ca.crt": string(p.CAPEM)})
	createSecret(t, ns, "reporting-legacy", map[string]string{"password": "Reporting0123456789"})
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two"},
		Spec: v1.CredentialSetSpec{
			Postgres: &v1.PostgresSpec{
				Hosts:          []string{p.Primary.Addr(), p.Replica.Addr()},
				Admin:          v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "pg-ca", Key: "ca.crt"},
				// The reporting login exists today: its role is adopted.
				Logins: []v1.PostgresLogin{{Base: "app", Group: "app_owner"}, {Base: "report", Group: "report_reader",
					Adopt: &v1.PostgresAdopt{Role: "reporting", PasswordSecretRef: v1.SecretKeyRef{Name: "reporting-legacy", Key: "password"}}}},
				Connection: &v1.PostgresConnection{Host: "127.0.0.1", Port: int32(p.Primary.Port), DBName: "postgres"},
			},
			Distribution:   []v1.SecretTarget{{Namespace: ns, Name: "two-db"}},
			ConsumerGroups: []v1.ConsumerGroup{{Name: "web", Members: []string{"web-0"}}},
			Rotation:       v1.RotationSpec{DiscardPolicy: v1.DiscardManual},
		},
	}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "two", v1.PhaseIdle, 1)
	g1 := secretData(t, ns, "two-db")
	app1, rep1 := loginData(t, g1, "app", "app_g1"), loginData(t, g1, "report", "reporting")
	if string(rep1["password"]) != "Reporting0123456789" {
		t.Fatal("the adopted role is distributed with another password than its own")
	}
	assertPgURI(t, p, app1)
	assertPgURI(t, p, rep1)
	if out, err := p.Pgbench(p.Primary, "app_g1", string(app1["password"]), "-i", "-s", "1", "-q"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	assertPgOwner(t, p, "pgbench_accounts", "app_owner")
	if err := p.Exec(p.Primary, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO report_reader"); err != nil {
		t.Fatal(err)
	}
	appC, repC := startPgConsumer(t, p, app1), startPgConsumer(t, p, rep1)

	rotate(t, ns, "two", "r1")
	waitPhase(t, ns, "two", v1.PhaseDistributed, 1)
	g2 := secretData(t, ns, "two-db")
	app2, rep2 := loginData(t, g2, "app", "app_g2"), loginData(t, g2, "report", "report_g2")
	if string(app2["password"]) == string(app1["password"]) || string(rep2["password"]) == string(rep1["password"]) {
		t.Fatal("a login kept its password through the rotation")
	}
	assertPgURI(t, p, app2)
	assertPgURI(t, p, rep2)
	for _, pair := range [][]string{{"app_g", "app_g1,app_g2"}, {"report", "report_g2,report_reader,reporting"}} {
		if got := strings.Join(pgRoles(t, p, pair[0]), ","); got != pair[1] {
			t.Fatalf("while Distributed the roles are %s, want %s (old and new)", got, pair[1])
		}
	}
	// The consumers restart with the new logins and are reported moved.
	appC.waitLogins(t, 20)
	repC.waitLogins(t, 20)
	appC.stop(t)
	repC.stop(t)
	appC, repC = startPgConsumer(t, p, app2), startPgConsumer(t, p, rep2)
	appC.waitLogins(t, 20)
	repC.waitLogins(t, 20)
	if _, err := ack(t, ns, "two", "web", waitHash(t, ns, "two"), "web-0"); err != nil {
		t.Fatal(err)
	}
	discard(t, ns, "two", "r1")
	waitPhase(t, ns, "two", v1.PhaseIdle, 2)
	for _, pair := range [][]string{{"app_g", "app_g2"}, {"report", "report_g2,report_reader"}} {
		if got := strings.Join(pgRoles(t, p, pair[0]), ","); got != pair[1] {
			t.Fatalf("after the discard the roles are %s, want only %s", got, pair[1])
		}
	}
	for _, old := range []map[string][]byte{app1, rep1} {
		for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
			if err := p.CanLogin(i, string(old["username"]), string(old["password"])); err == nil {
				t.Fatalf("%s still logs in on the %s after the discard", old["username"], i.Name)
			}
		}
	}
	appC.waitLogins(t, appC.count()+20)
	repC.waitLogins(t, repC.count()+20)
	appC.stop(t)
	repC.stop(t)
	assertNoSecretLeaked(t, ns, "two", map[string]string{"admin": p.AdminPassword,
		"app_g1": string(app1["password"]), "app_g2": string(app2["password"]),
		"reporting": string(rep1["password"]), "report_g2": string(rep2["password"])})

	// Deleted with deletionPolicy Delete once its consumer group is gone,
	// the set takes both current logins with it.
	updateSpec(t, ns, "two", func(cs *v1.CredentialSet) {
		cs.Spec.ConsumerGroups, cs.Spec.DeletionPolicy = nil, v1.DeletionDelete
	})
	if err := k8s.Delete(ctxT(t), getSet(t, ns, "two")); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the set is deleted with both its login roles", func() (bool, string) {
		err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "two"}, &v1.CredentialSet{})
		roles := append(pgRoles(t, p, "app_g"), pgRoles(t, p, "report_g")...)
		return apierrors.IsNotFound(err) && len(roles) == 0, fmt.Sprintf("get: %v, roles left: %v", err, roles)
	})
}

// loginData is what the distributed Secret holds for login base, under
// the keys a one-login Secret has; its username must be want.
func loginData(t testing.TB, data map[string][]byte, base, want string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for k, v := range data {
		if rest, ok := strings.CutPrefix(k, base+"."); ok {
			out[rest] = v
		}
	}
	if string(out["username"]) != want {
		t.Fatalf("the distributed Secret names %q under %s.username, want %s", out["username"], base, want)
	}
	return out
}
