package e2e

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// TestPostgresLoginTargets: a set with two logins distributes each to a
// Secret of its own (distribution[].login) in CloudNativePG's layout —
// username, password, uri, ... of that login alone — which a Deployment
// of consumer pods each reads at start, and pgbench as well, on a real
// primary and replica. Through a rotation (both Deployments rolled out by
// rekey, their new pods reading the new login) and the discard that
// follows, no pod and no pgbench connection is refused, and the old
// login roles are gone.
func TestPostgresLoginTargets(t *testing.T) {
	p := pgMatrixCluster(t)
	if err := p.Exec(p.Primary, "CREATE ROLE app_owner NOLOGIN", "GRANT CREATE ON SCHEMA public TO app_owner",
		"CREATE ROLE reporting NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	createSecret(t, ns, "pg-admin", map[string]string{"username": p.AdminUser, "password": p.AdminPassword})
	createSecret(t, ns, "pg-ca", map[string]string{"ca.crt": string(p.CAPEM)})
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "split"},
		Spec: v1.CredentialSetSpec{
			Postgres: &v1.PostgresSpec{
				Hosts:          []string{p.Primary.Addr(), p.Replica.Addr()},
				Admin:          v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "pg-ca", Key: "ca.crt"},
				Logins:         []v1.PostgresLogin{{Base: "shop", Group: "app_owner"}, {Base: "report", Group: "reporting"}},
				Connection:     &v1.PostgresConnection{Host: "127.0.0.1", Port: int32(p.Primary.Port), DBName: "postgres"},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "shop-db", Login: "shop"}, {Namespace: ns, Name: "report-db", Login: "report"}},
			Rotation:     v1.RotationSpec{DiscardPolicy: v1.DiscardManual},
		},
	}
	shopPods := deployConsumersOf(t, cs, "shop", "shop-db", pgWay(p))
	reportPods := deployConsumersOf(t, cs, "report", "report-db", pgWay(p))
	startManager(t, cp.Config)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "split", v1.PhaseIdle, 1)
	shop, report := oneLogin(t, p, ns, "shop-db", "shop_g1"), oneLogin(t, p, ns, "report-db", "report_g1")
	if out, err := p.Pgbench(p.Primary, "shop_g1", string(shop["password"]), "-i", "-s", "1", "-q"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := p.Exec(p.Primary, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO reporting"); err != nil {
		t.Fatal(err)
	}
	benches := []*pgConsumer{startPgConsumer(t, p, shop), startPgConsumer(t, p, report)}
	m := matrixMark(t, nil, "PostgreSQL, two logins each in a Secret of its own (distribution[].login): a rotation and its discard")

	rotate(t, ns, "split", "r1")
	waitPhase(t, ns, "split", v1.PhaseDistributed, 1)
	shop2, report2 := oneLogin(t, p, ns, "shop-db", "shop_g2"), oneLogin(t, p, ns, "report-db", "report_g2")
	for _, l := range []map[string][]byte{shop, report, shop2, report2} {
		for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
			if err := p.CanLogin(i, string(l["username"]), string(l["password"])); err != nil {
				t.Fatalf("Distributed: %s on the %s: %v", l["username"], i.Name, err)
			}
		}
	}
	observed(t, "Distributed: shop_g1, report_g1, shop_g2 and report_g2 log in on the primary and the replica")
	// pgbench is restarted by hand, as automation outside Kubernetes
	// would; the pods are rekey's to restart.
	for _, b := range benches {
		b.waitLogins(t, b.count()+10)
		b.stop(t)
	}
	benches = []*pgConsumer{startPgConsumer(t, p, shop2), startPgConsumer(t, p, report2)}
	discard(t, ns, "split", "r1")
	waitPhase(t, ns, "split", v1.PhaseIdle, 2)
	m.reached()
	for base, want := range map[string]string{"shop": "shop_g2", "report": "report_g2"} {
		if roles := pgRoles(t, p, base+"_g"); !slices.Equal(roles, []string{want}) {
			t.Fatalf("after discard the roles of %s are %v, want only %s", base, roles, want)
		}
	}
	observed(t, "Idle at generation 2: only shop_g2 and report_g2 are left")
	n := 0
	for _, b := range benches {
		b.waitLogins(t, b.count()+10)
		b.stop(t)
		n += b.count()
	}
	for _, pc := range []*podConsumers{shopPods, reportPods} {
		if st := pc.totals(); st.starts < 2*consumerReplicas || st.attempts == 0 {
			t.Fatalf("consumer pods of %s: %d starts, %d logins: the rollout did not restart them", pc.name, st.starts, st.attempts)
		}
	}
	m.saw("pgbench (reading each Secret at start, restarted by the test after the rotation): %d connections after the rotation, none refused", n)
	m.done(t, "each Secret holds one login in CloudNativePG's layout; pods and pgbench reading each were never refused; the old login roles are dropped")
}

// oneLogin is Secret name's data, which must be one login's alone
// (CloudNativePG's layout, no "<base>." key) naming want; its uri logs in.
func oneLogin(t testing.TB, p *testenv.Postgres, ns, name, want string) map[string][]byte {
	t.Helper()
	d := secretData(t, ns, name)
	if got := string(d["username"]); got != want {
		t.Fatalf("Secret %s names %q, want %s", name, got, want)
	}
	for k := range d {
		if strings.Contains(k, ".") {
			t.Fatalf("Secret %s holds %s, a key of the set's layout of several logins", name, k)
		}
	}
	assertPgURI(t, p, d)
	observed(t, "Secret %s holds %s alone, in CloudNativePG's layout; its uri logs in", name, want)
	return d
}
