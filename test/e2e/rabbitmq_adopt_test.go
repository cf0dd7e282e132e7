package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/rabbitmq"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// testRabbitMQAdopt, in TestRabbitMQOwnership's broker: a
// service logs in as a user made before rekey. A set adopting it with a
// wrong password is refused with a Warning and nothing changes; with the
// right one the user becomes generation 1 as it is (its password, tags and
// grants, plus the set's mark) and is distributed; a rotation and a
// discard move the service to <base>-g2 and delete the adopted user.
func testRabbitMQAdopt(t *testing.T, m *testenv.RabbitMQ, ns string) {
	const legacyPW = "legacy-password-0123456789"
	const wrongPW = "not-the-legacy-password-0123"
	putForeignUser(t, m, "legacy-svc", legacyPW, "monitoring")
	res, err := m.Client().UpdatePermissionsIn("/", "legacy-svc", rabbithole.Permissions{Configure: "^legacy\\.", Write: ".*", Read: ".*"})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	before := readBrokerUser(t, m, "legacy-svc")
	f := startFleet(t, m)
	f.mu.Lock()
	f.creds["svc-0"] = [2]string{"legacy-svc", legacyPW} // the service, as it ran before rekey
	f.mu.Unlock()

	createSecret(t, ns, "legacy-pw", map[string]string{"password": wrongPW})
	cs := rabbitSet(t, ns, "adopter", m)
	cs.Spec.RabbitMQ.Adopt = &v1.RabbitMQAdopt{User: "legacy-svc", PasswordSecretRef: v1.SecretKeyRef{Name: "legacy-pw", Key: "password"}}
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardManual}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	note := waitEvent(t, ns, "adopter", string(reason.ProvisionFailed))
	mustContain(t, "ProvisionFailed event", note, "spec.rabbitmq.adopt.passwordSecretRef", "does not log in as user legacy-svc", "changed nothing")
	eventually(t, 30*time.Second, "Degraded ProvisionFailed", func() (bool, string) {
		c := condition(getSet(t, ns, "adopter"), reason.CondDegraded)
		return c != nil && c.Status == "True" && c.Reason == string(reason.ProvisionFailed), fmt.Sprint(c)
	})
	holdsFor(t, 2*time.Second, "nothing changes while the adopt password is wrong", func() (bool, string) {
		after := readBrokerUser(t, m, "legacy-svc")
		cs := getSet(t, ns, "adopter")
		err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "adopter-transport"}, &corev1.Secret{})
		return slices.Equal(after.tags, before.tags) && slices.Equal(after.perms, before.perms) &&
				cs.Status.KeyGeneration == 0 && apierrors.IsNotFound(err) && !sourceHoldsData(t, cs) && len(rabbitUsers(t, m, "adopter")) == 0,
			fmt.Sprintf("%+v gen %d transport Secret: %v", after, cs.Status.KeyGeneration, err)
	})
	assertUntouched(t, m, "legacy-svc", legacyPW, before)

	// The right password: generation 1 is the service's own user.
	s := &corev1.Secret{}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "legacy-pw"}, s); err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"password": []byte(legacyPW)}
	if err := k8s.Update(ctxT(t), s); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "adopter", v1.PhaseIdle, 1)
	if cs.Status.KeyVersion != "" {
		t.Fatalf("an adopted user's keyVersion is %q, want empty (nobody knows what minted it)", cs.Status.KeyVersion)
	}
	g1 := secretData(t, ns, "adopter-transport")
	assertTransport(t, g1, m, "legacy-svc")
	if string(g1["password"]) != legacyPW {
		t.Fatal("the distributed password is not the adopted user's")
	}
	mark := rabbitmq.OwnerTag(string(cs.UID))
	adopted := readBrokerUser(t, m, "legacy-svc")
	if want := slices.Sorted(slices.Values(append(slices.Clone(before.tags), mark))); !slices.Equal(adopted.tags, want) || !slices.Equal(adopted.perms, before.perms) {
		t.Fatalf("the adopted user holds %+v, want its own tags and grants plus %s", adopted, mark)
	}

	rotate(t, ns, "adopter", "r1")
	waitPhase(t, ns, "adopter", v1.PhaseDistributed, 1)
	g2 := secretData(t, ns, "adopter-transport")
	assertTransport(t, g2, m, "adopter-g2")
	assertPermissions(t, m, getSet(t, ns, "adopter"), "adopter-g2")
	if err := m.CanAuthenticate("legacy-svc", legacyPW); err != nil {
		t.Fatalf("during the overlap the adopted user must still log in: %v", err)
	}
	f.deploy(t, ns, "adopter-transport", "svc-0") // the service restarts on the new Secret
	discard(t, ns, "adopter", "r1")
	waitPhase(t, ns, "adopter", v1.PhaseIdle, 2)
	if err := m.CanAuthenticate("legacy-svc", legacyPW); err == nil {
		t.Fatal("the adopted user still logs in over AMQP after the first rotation completed")
	}
	if _, err := m.ClientAs("legacy-svc", legacyPW).Whoami(); err == nil {
		t.Fatal("the adopted user still logs in to the management API after the first rotation completed")
	}
	if _, err := m.Client().GetUser("legacy-svc"); err == nil {
		t.Fatal("the adopted user still exists")
	}
	if err := m.CanAuthenticate("adopter-g2", string(g2["password"])); err != nil {
		t.Fatalf("generation 2 must log in: %v", err)
	}
	f.assertNoGap(t)
	assertNoSecretLeaked(t, ns, "adopter", map[string]string{"legacy": legacyPW, "wrong": wrongPW, "g2": string(g2["password"]), "admin": m.AdminPassword})
	deleteSetAndWait(t, ns, "adopter")
}

// testRabbitMQSameUsers, in TestRabbitMQOwnership's broker:
// a set making the same users as a working one on the same cluster is
// refused, through the same endpoint and through another address of the
// same broker (the cluster name tells them apart), while the working set
// goes on rotating: a newcomer can never stop it.
func testRabbitMQSameUsers(t *testing.T, m *testenv.RabbitMQ, ns string) {
	if err := k8s.Create(ctxT(t), rabbitSet(t, ns, "first", m)); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "first", v1.PhaseIdle, 1)
	eventually(t, 30*time.Second, "first identifies its cluster", func() (bool, string) {
		c := getSet(t, ns, "first").Status.Cluster
		return c != "", c
	})
	g1 := secretData(t, ns, "first-transport")

	sameEndpoint := rabbitSet(t, ns, "again", m)
	sameEndpoint.Spec.RabbitMQ.User.Base = "first"
	otherAddress := rabbitSet(t, ns, "elsewhere", m)
	otherAddress.Spec.RabbitMQ.User.Base = "first"
	otherAddress.Spec.RabbitMQ.Endpoint = strings.Replace(m.MgmtURL, "127.0.0.1", "localhost", 1)
	for _, cs := range []*v1.CredentialSet{sameEndpoint, otherAddress} {
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
	}
	cluster := getSet(t, ns, "first").Status.Cluster
	for name, want := range map[string][]string{
		"again":     {"CredentialSet " + ns + "/first", `user base "first"`, "on " + m.MgmtURL, "another rabbitmq.user.base"},
		"elsewhere": {"CredentialSet " + ns + "/first", `user base "first"`, "RabbitMQ cluster " + cluster, "another rabbitmq.user.base"},
	} {
		note := waitEvent(t, ns, name, string(reason.InvalidSpec))
		mustContain(t, name+"'s InvalidSpec event", note, want...)
		if cs := getSet(t, ns, name); cs.Status.KeyGeneration != 0 {
			t.Fatalf("%s provisioned generation %d of another set's users", name, cs.Status.KeyGeneration)
		}
	}

	// The set that came first is not held back by the newcomers.
	rotate(t, ns, "first", "r1")
	waitPhase(t, ns, "first", v1.PhaseDistributed, 1)
	discard(t, ns, "first", "r1")
	cs := waitPhase(t, ns, "first", v1.PhaseIdle, 2)
	if u := rabbitUsers(t, m, "first"); !slices.Equal(u, []string{"first-g2"}) {
		t.Fatalf("first's users are %v, want first-g2", u)
	}
	if err := m.CanAuthenticate("first-g1", string(g1["password"])); err == nil {
		t.Fatal("first-g1 still logs in after retirement")
	}
	if c := condition(cs, reason.CondDegraded); c == nil || c.Status != "False" {
		t.Fatalf("first is degraded: %v", c)
	}
	for _, n := range []string{"again", "elsewhere", "first"} {
		deleteSetAndWait(t, ns, n)
	}
}

// sourceHoldsData: the set's source Secret exists and holds something.
func sourceHoldsData(t testing.TB, cs *v1.CredentialSet) bool {
	t.Helper()
	s := &corev1.Secret{}
	err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: OperatorNamespace, Name: naming.SourceSecretName(cs)}, s)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(s.Data) > 0
}

// TestAdmissionRabbitMQAdopt: an adopted user named like one of the set's
// own generations is refused by the API server, with the way out.
func TestAdmissionRabbitMQAdopt(t *testing.T) {
	ns := newNamespace(t)
	set := func(user string) *v1.CredentialSet {
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "adopt-"},
			Spec: v1.CredentialSetSpec{RabbitMQ: &v1.RabbitMQSpec{
				Endpoint: "https://rabbitmq.openstack.svc:15671",
				Admin:    v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "rabbit-admin"}},
				User:     v1.RabbitMQUser{Base: "nova"},
				Adopt:    &v1.RabbitMQAdopt{User: user, PasswordSecretRef: v1.SecretKeyRef{Name: "nova-legacy", Key: "password"}},
			}},
		}
	}
	for _, user := range []string{"nova-g1", "nova-g12"} {
		err := k8s.Create(context.Background(), set(user))
		if err == nil {
			t.Fatalf("adopt.user %s admitted", user)
		}
		mustContain(t, "rejection of "+user, err.Error(), "spec.rabbitmq.adopt.user", "own generations", "name the user your services log in as today")
	}
	if err := k8s.Create(context.Background(), set("-nova")); err == nil || !strings.Contains(err.Error(), "adopt.user") {
		t.Fatalf("adopt.user -nova: %v, want the name pattern's rejection", err)
	}
	for _, user := range []string{"nova", "nova-gold", "nova-g1x", "nova_cell1"} {
		if err := k8s.Create(context.Background(), set(user)); err != nil {
			t.Errorf("adopt.user %s rejected: %v", user, err)
		}
	}
}
