package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestPostgresStatefulSet: a set whose instances are the pods of a
// StatefulSet (their cluster DNS names mapped onto the real primary and
// replica) waits, naming it, until the StatefulSet exists, then
// provisions on its pods; a pod added by scaling it up is part of the
// next phase (here one that does not answer holds the rotation, named),
// and once it is scaled back the rotation and its discard complete on
// both real instances.
func TestPostgresStatefulSet(t *testing.T) {
	p := testenv.PostgresForTest(t)
	if err := p.Exec(p.Primary, "CREATE ROLE app_owner NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	// Pod n of StatefulSet pg, whatever the namespace.
	addrs := map[string]string{"pg-0": p.Primary.Addr(), "pg-1": p.Replica.Addr(), "pg-2": closedPort(t)}
	startManager(t, cp.Config, func(r *controller.Reconciler) {
		r.AddressMap = func(a string) string { return addrs[strings.SplitN(a, ".", 2)[0]] }
	})
	ns := newNamespace(t)
	pod := func(n int) string { return fmt.Sprintf("pg-%d.pg-hl.%s.svc:5432", n, ns) }
	createSecret(t, ns, "pg-admin", map[string]string{"username": p.AdminUser, "password": p.AdminPassword})
	createSecret(t, ns, "pg-ca", map[string]string{"ca.crt": string(p.CAPEM)})
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sts"},
		Spec: v1.CredentialSetSpec{
			Postgres: &v1.PostgresSpec{
				StatefulSets:   []v1.PostgresStatefulSet{{Name: "pg"}},
				Admin:          v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "pg-ca", Key: "ca.crt"},
				Login:          v1.PostgresLogin{Base: "app", Group: "app_owner"},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "sts-db"}},
			Rotation:     v1.RotationSpec{DiscardPolicy: v1.DiscardManual},
		},
	}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	msg := waitDegraded(t, ns, "sts", reason.InvalidSpec)
	mustContain(t, "InvalidSpec", msg, "StatefulSet "+ns+"/pg", "does not exist")

	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(2)), ServiceName: "pg-hl",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "pg"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "postgres", Image: "postgres:15"}}},
			},
		},
	}
	if err := k8s.Create(ctxT(t), sts); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "sts", v1.PhaseIdle, 1)
	g1 := secretData(t, ns, "sts-db")
	assertLogsInEverywhere(t, p, g1)

	scale(t, ns, "pg", 3)
	rotate(t, ns, "sts", "r1")
	msg = waitDegraded(t, ns, "sts", reason.InstanceUnreachable)
	mustContain(t, "InstanceUnreachable", msg, pod(2))
	scale(t, ns, "pg", 2)
	waitPhase(t, ns, "sts", v1.PhaseDistributed, 1)
	g2 := secretData(t, ns, "sts-db")
	assertLogsInEverywhere(t, p, g2)
	discard(t, ns, "sts", "r1")
	waitPhase(t, ns, "sts", v1.PhaseIdle, 2)
	if roles := pgRoles(t, p, "app_g"); strings.Join(roles, ",") != "app_g2" {
		t.Fatalf("after the discard the roles are %v, want only app_g2", roles)
	}
}

func assertLogsInEverywhere(t testing.TB, p *testenv.Postgres, d map[string][]byte) {
	t.Helper()
	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		if err := p.CanLogin(i, string(d["username"]), string(d["password"])); err != nil {
			t.Fatalf("the distributed login %s on the %s: %v", d["username"], i.Name, err)
		}
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestAdmissionPostgresStatefulSets: malformed spec.postgres.statefulSets
// are refused with what to fix.
func TestAdmissionPostgresStatefulSets(t *testing.T) {
	ns := newNamespace(t)
	pg := func() *v1.CredentialSet {
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "pg-"},
			Spec: v1.CredentialSetSpec{Postgres: &v1.PostgresSpec{
				StatefulSets: []v1.PostgresStatefulSet{{Name: "pg-primary"}, {Name: "pg-read", ServiceName: "pg-hl", Port: 6432}},
				Admin:        v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
				Login:        v1.PostgresLogin{Base: "app", Group: "app_owner"},
			}},
		}
	}
	for _, c := range []struct {
		name   string
		mutate func(*v1.PostgresSpec)
		want   []string
	}{
		{"hosts and statefulSets", func(s *v1.PostgresSpec) { s.Hosts = []string{"db:5432"} }, []string{"spec.postgres", "set exactly one of them"}},
		{"neither", func(s *v1.PostgresSpec) { s.StatefulSets = nil }, []string{"spec.postgres.hosts", "spec.postgres.statefulSets"}},
		{"five", func(s *v1.PostgresSpec) {
			for _, n := range []string{"a", "b", "c"} {
				s.StatefulSets = append(s.StatefulSets, v1.PostgresStatefulSet{Name: n})
			}
		}, []string{"spec.postgres.statefulSets", "4"}},
		{"a name listed twice", func(s *v1.PostgresSpec) { s.StatefulSets[1].Name = "pg-primary" }, []string{"spec.postgres.statefulSets[1]", "Duplicate"}},
		{"a name with a dot", func(s *v1.PostgresSpec) { s.StatefulSets[0].Name = "pg.other" }, []string{"spec.postgres.statefulSets[0].name"}},
		{"a Service name too long", func(s *v1.PostgresSpec) { s.StatefulSets[0].ServiceName = strings.Repeat("s", 64) }, []string{"spec.postgres.statefulSets[0].serviceName", "63"}},
		{"a port too high", func(s *v1.PostgresSpec) { s.StatefulSets[1].Port = 70000 }, []string{"spec.postgres.statefulSets[1].port", "65535"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := pg()
			c.mutate(cs.Spec.Postgres)
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
	if err := k8s.Create(ctxT(t), pg()); err != nil {
		t.Errorf("well-formed spec rejected: %v", err)
	}
}
