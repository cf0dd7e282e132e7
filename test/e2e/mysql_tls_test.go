package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestMySQLTransport: on the real control plane, against mysqld serving a
// certificate of the test CA. A set whose CA did not sign that certificate,
// or whose tlsServerName the certificate does not hold, provisions nothing
// and says which field to fix, without a password in what it says; fixing
// the CA Secret or the spec lets it provision (the CA is read every time).
// A verified set reports TransportVerified=True; a SkipVerify set works, and
// is reported with TransportVerified=False and an InsecureTransport Warning.
func TestMySQLTransport(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{NoReplicas: true})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	createSecret(t, ns, "admin", map[string]string{"password": testenv.EnvPassword})
	goodCA := mysqlCASecret(t, ns, "mysql-ca")
	other, err := testenv.OtherCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	createSecret(t, ns, "wrong-ca", map[string]string{"ca.crt": string(other)})
	set := func(name string, edit func(*v1.MySQLSpec)) {
		t.Helper()
		cs := &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{Hosts: c.Addrs()},
				Admin:     v1.MySQLAdmin{User: testenv.EnvUser, PasswordSecretRef: &v1.SecretKeyRef{Name: "admin", Key: "password"}},
				Users:     []v1.MySQLUser{{Name: name}},
			}, Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-db"}}},
		}
		edit(cs.Spec.MySQL)
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(name string, want ...string) {
		t.Helper()
		// Wait on the state, then read the Warning: rekey writes the
		// condition before it emits the Event that reports it.
		waitFor(t, time.Minute, name+" Degraded=True with the TLS problem", func() (bool, string) {
			cond := condition(getSet(t, ns, name), reason.CondDegraded)
			return cond != nil && cond.Status == metav1.ConditionTrue && strings.Contains(cond.Message, "TLS certificate"), fmt.Sprintf("%+v", cond)
		})
		note := waitEvent(t, ns, name, string(reason.BackendError))
		for _, w := range want {
			if !strings.Contains(note, w) {
				t.Errorf("%s: Warning %q does not say %q", name, note, w)
			}
		}
		if strings.Contains(note, testenv.EnvPassword) {
			t.Fatalf("%s: the Warning holds the admin's password", name)
		}
		cs := getSet(t, ns, name)
		if cs.Status.KeyGeneration != 0 {
			t.Fatalf("%s: provisioned (generation %d) over an unverified connection", name, cs.Status.KeyGeneration)
		}
		if cond := condition(cs, reason.CondDegraded); cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "TLS certificate") {
			t.Errorf("%s: Degraded condition %+v, want True with the TLS problem", name, cond)
		}
		if err := c.Primary.CanLogin(name, "x"); err == nil || !strings.Contains(err.Error(), "Access denied") {
			t.Fatalf("%s: user exists on the server (or the check failed): %v", name, err)
		}
		t.Logf("%s refused: %s", name, note)
	}
	verified := func(name string) {
		t.Helper()
		cs := waitPhase(t, ns, name, v1.PhaseIdle, 1)
		eventually(t, 30*time.Second, name+" TransportVerified=True", func() (bool, string) {
			cs = getSet(t, ns, name)
			cond := condition(cs, reason.CondTransportVerified)
			return cond != nil && cond.Status == metav1.ConditionTrue, condSummary(cs)
		})
	}

	// A CA that signed nothing the server holds, then the right one put in
	// the same Secret key.
	set("wrongca", func(m *v1.MySQLSpec) { m.TLSCASecretRef = &v1.SecretKeyRef{Name: "wrong-ca", Key: "ca.crt"} })
	refused("wrongca", "not trusted", "spec.mysql.tlsCASecretRef", "put the right CA there")
	s := &corev1.Secret{}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "wrong-ca"}, s); err != nil {
		t.Fatal(err)
	}
	ca, _ := testenv.MySQLCAPEM()
	s.Data = map[string][]byte{"ca.crt": ca}
	if err := k8s.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	verified("wrongca")

	// The right CA, a server name the certificate does not hold; then the
	// one it holds, for every instance.
	set("wrongname", func(m *v1.MySQLSpec) { m.TLSCASecretRef = goodCA; m.TLSServerName = "mysql.example.org" })
	refused("wrongname", "not valid for", "mysql.example.org", "spec.mysql.tlsServerName")
	updateSpec(t, ns, "wrongname", func(cs *v1.CredentialSet) { cs.Spec.MySQL.TLSServerName = testenv.MySQLTLSName })
	verified("wrongname")

	// An explicit opt-out works and is reported.
	set("skipverify", func(m *v1.MySQLSpec) { m.TLS = "SkipVerify" })
	waitPhase(t, ns, "skipverify", v1.PhaseIdle, 1)
	note := waitEvent(t, ns, "skipverify", string(reason.InsecureTransport))
	if !strings.Contains(note, "spec.mysql.tls is SkipVerify") {
		t.Fatalf("InsecureTransport Warning %q does not name spec.mysql.tls", note)
	}
	eventually(t, 30*time.Second, "skipverify TransportVerified=False", func() (bool, string) {
		cs := getSet(t, ns, "skipverify")
		cond := condition(cs, reason.CondTransportVerified)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == string(reason.InsecureTransport) &&
			strings.Contains(cond.Message, "set spec.mysql.tls to Required"), condSummary(cs)
	})
}
