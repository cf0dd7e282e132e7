package e2e

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestRabbitMQCoverage is the per-user coverage scenario on a real broker: two sets
// share one RabbitMQ cluster, their consumer groups are updated in
// batches, and the old user of a rotated set is deleted only after the last
// batch of its group — never while any member could still hold it, and
// without waiting for the other set, whose members never hold it.
func TestRabbitMQCoverage(t *testing.T) {
	m := testenv.RabbitMQForTest(t)
	t.Logf("rabbitmq-server %s", m.Version)
	startManager(t, cp.Config)
	ns := newNamespace(t)
	computeA := v1.ConsumerGroup{Name: "compute-a", Members: []string{"a0", "a1", "a2"}}
	computeB := v1.ConsumerGroup{Name: "compute-b", Members: []string{"b0", "b1"}}
	for _, cs := range []*v1.CredentialSet{rabbitSet(t, ns, "nova", m, computeA), rabbitSet(t, ns, "neutron", m, computeB)} {
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
	}
	nova := waitPhase(t, ns, "nova", v1.PhaseIdle, 1)
	waitPhase(t, ns, "neutron", v1.PhaseIdle, 1)
	eventually(t, 30*time.Second, "both sets identify the same cluster", func() (bool, string) {
		a, b := getSet(t, ns, "nova").Status.Cluster, getSet(t, ns, "neutron").Status.Cluster
		return a != "" && a == b, a + " / " + b
	})
	f := startFleet(t, m)
	f.deploy(t, ns, "nova-transport", computeA.Members...)
	hB1 := f.deploy(t, ns, "neutron-transport", computeB.Members...)
	g1 := secretData(t, ns, "nova-transport")
	assertTransport(t, g1, m, "nova-g1")

	rotate(t, ns, "nova", "r1")
	nova = waitPhase(t, ns, "nova", v1.PhaseDistributed, 1)
	g2 := secretData(t, ns, "nova-transport")
	assertTransport(t, g2, m, "nova-g2")
	overlap := map[string]string{"nova-g1": string(g1["password"]), "nova-g2": string(g2["password"])}
	for u, pw := range overlap {
		if err := m.CanAuthenticate(u, pw); err != nil {
			t.Fatalf("during the overlap %s must log in over AMQP: %v", u, err)
		}
		if _, err := m.ClientAs(u, pw).Whoami(); err != nil {
			t.Fatalf("during the overlap %s must log in to the management API: %v", u, err)
		}
	}
	assertPermissions(t, m, nova, "nova-g2")

	// An ack for the distribution before the rotation does not count.
	hA1 := waitHash(t, ns, "nova")
	if _, err := ack(t, ns, "nova", "compute-a", hB1, "a0"); err == nil {
		t.Fatal("ack with a hash that is not the set's current one must be refused")
	}
	annotate(t, ns, "nova", "rekey.io/ack.compute-a", "0123456789ab:a0,a1,a2")
	waitEvent(t, ns, "nova", string(reason.AckIgnored))

	// Batch 1 of compute-a.
	hA2 := f.deploy(t, ns, "nova-transport", "a0")
	if hA2 != hA1 {
		t.Fatalf("the distribution Secret carries hash %s, status says %s", hA2, hA1)
	}
	if hA2 == hB1 {
		t.Fatal("two sets' distributions share a hash")
	}
	if _, err := ack(t, ns, "nova", "compute-a", hA2, "a0"); err != nil {
		t.Fatal(err)
	}
	waitCoverage(t, ns, "nova", "compute-a", "1/3")
	eventually(t, 10*time.Second, "coverage metrics", func() (bool, string) {
		moved, ok1 := metricValue(t, "rekey_group_members", map[string]string{"namespace": ns, "name": "nova", "group": "compute-a", "state": "moved"})
		waiting, ok2 := metricValue(t, "rekey_group_members", map[string]string{"namespace": ns, "name": "nova", "group": "compute-a", "state": "waiting"})
		return ok1 && ok2 && moved == 1 && waiting == 2, fmt.Sprintf("moved %v waiting %v", moved, waiting)
	})
	// compute-b acknowledges its current distribution in part; then
	// neutron rotates, which resets its coverage.
	if _, err := ack(t, ns, "neutron", "compute-b", hB1, "b0"); err != nil {
		t.Fatal(err)
	}
	waitCoverage(t, ns, "neutron", "compute-b", "1/2")
	neutronHealthy := time.Now()
	rotate(t, ns, "neutron", "r1")
	waitPhase(t, ns, "neutron", v1.PhaseDistributed, 1)
	waitHash(t, ns, "neutron")
	waitCoverage(t, ns, "neutron", "compute-b", "0/2")
	waitEvent(t, ns, "neutron", string(reason.CoverageReset))

	// The rest of compute-a: every consumer that can hold nova-g1 moved.
	// neutron, on the same cluster, is stuck with none of its members
	// moved, but it holds users of its own: nova's retirement goes ahead
	// and neutron says what its own waits for.
	f.deploy(t, ns, "nova-transport", "a1", "a2")
	if _, err := ack(t, ns, "nova", "compute-a", "", "a1", "a2"); err != nil {
		t.Fatal(err)
	}
	waitCoverage(t, ns, "nova", "compute-a", "3/3")
	nova = waitPhase(t, ns, "nova", v1.PhaseIdle, 2)
	if w := nova.Status.RetirementWaitsFor; len(w) != 0 {
		t.Fatalf("nova retired, yet says it waits for %v", w)
	}
	if err := m.CanAuthenticate("nova-g1", string(g1["password"])); err == nil {
		t.Fatal("nova-g1 still logs in over AMQP after retirement")
	}
	if _, err := m.ClientAs("nova-g1", string(g1["password"])).Whoami(); err == nil {
		t.Fatal("nova-g1 still logs in to the management API after retirement")
	}
	neutronWaits := func(member string) {
		t.Helper()
		eventually(t, 30*time.Second, "neutron says its retirement waits for "+member, func() (bool, string) {
			w := getSet(t, ns, "neutron").Status.RetirementWaitsFor
			return len(w) == 1 && strings.Contains(w[0], "compute-b") && strings.Contains(w[0], member) && !strings.Contains(w[0], "nova"), strings.Join(w, "; ")
		})
	}
	neutronWaits("b0, b1")
	holdsFor(t, 3*time.Second, "neutron-g1 kept while its members have not moved", func() (bool, string) {
		cs := getSet(t, ns, "neutron")
		u := rabbitUsers(t, m, "neutron")
		return cs.Status.Phase == v1.PhaseDistributed && slices.Contains(u, "neutron-g1"), stateOf(cs) + " users " + strings.Join(u, ",")
	})
	if c := condition(getSet(t, ns, "neutron"), "RolloutComplete"); c == nil || c.Status != "False" {
		t.Fatalf("neutron's RolloutComplete: %v, want False", c)
	}

	// neutron's members move in two batches; only the last one frees
	// neutron-g1.
	hB2 := f.deploy(t, ns, "neutron-transport", "b1")
	if _, err := ack(t, ns, "neutron", "compute-b", hB2, "b1"); err != nil {
		t.Fatal(err)
	}
	waitCoverage(t, ns, "neutron", "compute-b", "1/2")
	neutronWaits("b0")
	holdsFor(t, 3*time.Second, "neutron-g1 kept until the last batch", func() (bool, string) {
		b := rabbitUsers(t, m, "neutron")
		return slices.Contains(b, "neutron-g1"), strings.Join(b, ",")
	})
	f.deploy(t, ns, "neutron-transport", "b0")
	if _, err := ack(t, ns, "neutron", "compute-b", hB2, "b0"); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "neutron", v1.PhaseIdle, 2)
	// Its members' acks of the previous distribution were still on the set
	// when the rotation changed the hash: stale, not a mistake.
	assertNoWarningSince(t, ns, "neutron", neutronHealthy, "a rotation whose members ack in two batches")
	if u := rabbitUsers(t, m, "neutron"); !slices.Equal(u, []string{"neutron-g2"}) {
		t.Fatalf("after retirement neutron's users are %v, want only neutron-g2", u)
	}
	if u := rabbitUsers(t, m, "nova"); !slices.Equal(u, []string{"nova-g2"}) {
		t.Fatalf("after retirement nova's users are %v, want only nova-g2", u)
	}
	if err := m.CanAuthenticate("nova-g1", string(g1["password"])); err == nil {
		t.Fatal("nova-g1 still logs in after retirement")
	}
	if err := m.CanAuthenticate("nova-g2", string(g2["password"])); err != nil {
		t.Fatalf("nova-g2 must log in after retirement: %v", err)
	}
	assertPermissions(t, m, nova, "nova-g2")
	waitEvent(t, ns, "nova", string(reason.RotationCompleted))
	if n, ok := metricValue(t, "rekey_retirements_total", map[string]string{"namespace": ns, "name": "nova"}); !ok || n != 1 {
		t.Fatalf("rekey_retirements_total for nova = %v (present %v), want 1", n, ok)
	}
	f.assertNoGap(t)
	assertNoSecretLeaked(t, ns, "neutron", map[string]string{"nova-g1": string(g1["password"]),
		"nova-g2": string(g2["password"]), "admin": m.AdminPassword})

	// Deleting a set (deletionPolicy Delete) while a consumer group still
	// uses its user keeps both.
	deleteWithPolicyDelete(t, ns, "nova")
	note := waitEvent(t, ns, "nova", string(reason.UsersInUse))
	if !strings.Contains(note, "compute-a") {
		t.Fatalf("UsersInUse must name the consumer: %q", note)
	}
	if u := rabbitUsers(t, m, "nova"); !slices.Equal(u, []string{"nova-g2"}) {
		t.Fatalf("a set deleted while in use must keep its user: %v", u)
	}
	updateSpec(t, ns, "nova", func(cs *v1.CredentialSet) { cs.Spec.ConsumerGroups = nil })
	eventually(t, time.Minute, "nova deleted with its users", func() (bool, string) {
		err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "nova"}, &v1.CredentialSet{})
		u := rabbitUsers(t, m, "nova")
		return apierrors.IsNotFound(err) && len(u) == 0, strings.Join(u, ",")
	})

	// neutron is deleted with the default policy (Discard) while its
	// members still run: it does not wait for them, its current user stays
	// and logs in with what they hold, without rekey's mark.
	neutron := getSet(t, ns, "neutron")
	current := secretData(t, ns, "neutron-transport")
	if err := k8s.Delete(ctxT(t), neutron); err != nil {
		t.Fatal(err)
	}
	waitSetGone(t, ns, "neutron")
	waitEvent(t, ns, "neutron", string(reason.Released))
	if u := rabbitUsers(t, m, "neutron"); !slices.Equal(u, []string{"neutron-g2"}) {
		t.Fatalf("after a Discard deletion neutron's users are %v, want only neutron-g2", u)
	}
	if err := m.CanAuthenticate("neutron-g2", string(current["password"])); err != nil {
		t.Fatalf("neutron-g2 must still log in with the distributed password: %v", err)
	}
	if tags := readBrokerUser(t, m, "neutron-g2").tags; slices.Contains(tags, rabbitmq.OwnerTag(string(neutron.UID))) {
		t.Fatalf("neutron-g2 keeps rekey's mark after the set's deletion: %v", tags)
	}
}

// waitHash waits until status names what the distribution Secret holds.
func waitHash(t testing.TB, ns, set string) string {
	t.Helper()
	var h string
	eventually(t, 30*time.Second, set+" status.secretHash matches its Secret", func() (bool, string) {
		cs := getSet(t, ns, set)
		h = cs.Status.SecretHash
		s := &corev1.Secret{}
		if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: cs.Spec.Distribution[0].Name}, s); err != nil {
			return false, err.Error()
		}
		return h != "" && h == s.Annotations[naming.SecretHashAnnotation], h + " vs " + s.Annotations[naming.SecretHashAnnotation]
	})
	return h
}

func waitCoverage(t testing.TB, ns, set, group, want string) {
	t.Helper()
	eventually(t, time.Minute, set+" "+group+" coverage "+want, func() (bool, string) {
		cs := getSet(t, ns, set)
		got := groupCoverage(cs, group)
		return got == want, got + " " + stateOf(cs)
	})
}

// holdsFor asserts cond stays true for d.
func holdsFor(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if ok, state := cond(); !ok {
			t.Fatalf("%s: no longer true (%s)", what, state)
		}
	}
}

// assertTransport checks the distributed keys: the user and password, a
// transport_url that parses back to them, and the config file embedding it.
func assertTransport(t testing.TB, data map[string][]byte, m *testenv.RabbitMQ, user string) {
	t.Helper()
	if got := string(data["username"]); got != user {
		t.Fatalf("distributed username %q, want %q", got, user)
	}
	u, err := url.Parse(string(data["transport_url"]))
	if err != nil {
		t.Fatalf("transport_url does not parse: %v", err)
	}
	pw, _ := u.User.Password()
	if u.Scheme != "rabbit" || u.User.Username() != user || pw != string(data["password"]) || u.Host != m.AMQPAddr() {
		t.Fatalf("transport_url does not name %s at %s with the distributed password (scheme %s, host %s)", user, m.AMQPAddr(), u.Scheme, u.Host)
	}
	conf := string(data["01-nova.conf"])
	if !strings.Contains(conf, "[DEFAULT]") || !strings.Contains(conf, "transport_url = "+string(data["transport_url"])) {
		t.Fatal("01-nova.conf does not carry the transport_url under [DEFAULT]")
	}
	if err := m.CanOpenVhost(user, pw, "/"); err != nil {
		t.Fatalf("%s cannot open vhost / with the distributed password: %v", user, err)
	}
}

// assertPermissions: the generation's user has exactly the spec's tags and
// permissions.
func assertPermissions(t testing.TB, m *testenv.RabbitMQ, cs *v1.CredentialSet, user string) {
	t.Helper()
	spec := cs.Spec.RabbitMQ.User
	c := m.Client()
	info, err := c.GetUser(user)
	if err != nil {
		t.Fatal(err)
	}
	// The spec's tags and rekey's mark of this very set, nothing else.
	want := slices.Sorted(slices.Values(append(slices.Clone(spec.Tags), rabbitmq.OwnerTag(string(cs.UID)))))
	if got := slices.Sorted(slices.Values(info.Tags)); !slices.Equal(got, want) {
		t.Fatalf("%s tags %v, want %v", user, got, want)
	}
	perms, err := c.ListPermissionsOf(user)
	if err != nil {
		t.Fatal(err)
	}
	if len(perms) != len(spec.Permissions) {
		t.Fatalf("%s has %d vhost permissions, want %d", user, len(perms), len(spec.Permissions))
	}
	for _, want := range spec.Permissions {
		p, err := c.GetPermissionsIn(want.Vhost, user)
		if err != nil {
			t.Fatal(err)
		}
		if p.Configure != want.Configure || p.Write != want.Write || p.Read != want.Read {
			t.Fatalf("%s on %s: %+v, want %+v", user, want.Vhost, p, want)
		}
	}
	topics, err := c.ListTopicPermissionsOf(user)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != len(spec.TopicPermissions) || len(topics) > 0 && (topics[0].Exchange != spec.TopicPermissions[0].Exchange || topics[0].Write != spec.TopicPermissions[0].Write) {
		t.Fatalf("%s topic permissions %+v, want %+v", user, topics, spec.TopicPermissions)
	}
}

// TestRabbitMQInvalidPermission: what admission cannot check (a permission
// that is not a regular expression) becomes a Degraded condition and a
// Warning naming the field, before anything reaches the broker.
func TestRabbitMQInvalidPermission(t *testing.T) {
	startManager(t, cp.Config)
	ns := newNamespace(t)
	createSecret(t, ns, "bad-admin", map[string]string{"username": "admin", "password": "admin-password-0123456789"})
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
		Spec: v1.CredentialSetSpec{RabbitMQ: &v1.RabbitMQSpec{
			Endpoint: "https://127.0.0.1:1",
			Admin:    v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "bad-admin"}},
			User:     v1.RabbitMQUser{Base: "bad", Permissions: []v1.RabbitMQPermission{{Vhost: "/", Configure: "(unclosed", Write: ".*", Read: ".*"}}},
		}},
	}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	note := waitEvent(t, ns, "bad", string(reason.InvalidSpec))
	mustContain(t, "InvalidSpec event", note, "configure")
	eventually(t, 30*time.Second, "Degraded InvalidSpec", func() (bool, string) {
		c := condition(getSet(t, ns, "bad"), reason.CondDegraded)
		return c != nil && c.Reason == string(reason.InvalidSpec) && strings.Contains(c.Message, "configure"), fmt.Sprint(c)
	})
	assertNoSecretLeaked(t, ns, "bad", map[string]string{"admin": "admin-password-0123456789"})
}
