package e2e

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/rabbitmq"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// brokerUser is what an e2e test compares of a user rekey must not touch.
type brokerUser struct {
	tags  []string
	perms []string
}

func readBrokerUser(t testing.TB, m *testenv.RabbitMQ, name string) brokerUser {
	t.Helper()
	c := m.Client()
	u, err := c.GetUser(name)
	if err != nil {
		t.Fatalf("user %s: %v", name, err)
	}
	perms, err := c.ListPermissionsOf(name)
	if err != nil {
		t.Fatal(err)
	}
	bu := brokerUser{tags: slices.Sorted(slices.Values(u.Tags))}
	for _, p := range perms {
		bu.perms = append(bu.perms, strings.Join([]string{p.Vhost, p.Configure, p.Write, p.Read}, " "))
	}
	slices.Sort(bu.perms)
	return bu
}

// assertUntouched: the user exists with the tags and grants it had, and
// its owner's password still logs in.
func assertUntouched(t testing.TB, m *testenv.RabbitMQ, name, password string, before brokerUser) {
	t.Helper()
	after := readBrokerUser(t, m, name)
	if !slices.Equal(after.tags, before.tags) || !slices.Equal(after.perms, before.perms) {
		t.Fatalf("%s changed: before %+v, after %+v", name, before, after)
	}
	if err := m.CanAuthenticate(name, password); err != nil {
		t.Fatalf("%s no longer logs in with its owner's password: %v", name, err)
	}
}

func putForeignUser(t testing.TB, m *testenv.RabbitMQ, name, password string, tags ...string) {
	t.Helper()
	res, err := m.Client().PutUser(name, rabbithole.UserSettings{Password: password, Tags: append(rabbithole.UserTags{}, tags...)})
	if err != nil {
		t.Fatalf("put user %s: %v", name, err)
	}
	res.Body.Close()
}

// deleteSetAndWait deletes a set with deletionPolicy Delete (the users
// rekey made for it go) and waits until it is gone.
func deleteSetAndWait(t testing.TB, ns, name string) {
	t.Helper()
	updateSpec(t, ns, name, func(cs *v1.CredentialSet) { cs.Spec.DeletionPolicy = v1.DeletionDelete })
	cs := getSet(t, ns, name)
	if err := k8s.Delete(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "set "+name+" deleted", func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &v1.CredentialSet{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestRabbitMQOwnership on the real control plane and broker: a set whose
// first generation's name another tenant already uses is refused with
// NotOwned (Warning and Degraded) and that user is neither re-passworded
// nor deleted, not even when the set is deleted; a set's orphan sweep,
// retirement and deletion pass by users of its pattern that it did not
// make; users rekey makes carry the set's mark and work over AMQP, AMQPS
// and the https management API. Adoption and same-users refusals share its
// broker.
func TestRabbitMQOwnership(t *testing.T) {
	m := testenv.RabbitMQForTest(t)
	startManager(t, cp.Config)
	ns := newNamespace(t)

	t.Run("another tenant's user", func(t *testing.T) {
		const theirs = "their-password-0123456789"
		putForeignUser(t, m, "taken-g1", theirs, "monitoring")
		res, err := m.Client().UpdatePermissionsIn("/", "taken-g1", rabbithole.Permissions{Configure: "^theirs$", Write: "^theirs$", Read: "^theirs$"})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		before := readBrokerUser(t, m, "taken-g1")
		if err := k8s.Create(ctxT(t), rabbitSet(t, ns, "taken", m)); err != nil {
			t.Fatal(err)
		}
		uid := string(getSet(t, ns, "taken").UID)
		note := waitEvent(t, ns, "taken", string(reason.NotOwned))
		mustContain(t, "NotOwned event", note, "user taken-g1", "not created by rekey for this CredentialSet", "tagging it rekey-owner-"+uid)
		eventually(t, 30*time.Second, "Degraded NotOwned", func() (bool, string) {
			c := condition(getSet(t, ns, "taken"), reason.CondDegraded)
			return c != nil && c.Status == "True" && c.Reason == string(reason.NotOwned) && strings.Contains(c.Message, "taken-g1"), fmt.Sprint(c)
		})
		holdsFor(t, 3*time.Second, "taken-g1 untouched while the set retries", func() (bool, string) {
			after := readBrokerUser(t, m, "taken-g1")
			return slices.Equal(after.tags, before.tags) && slices.Equal(after.perms, before.perms), fmt.Sprint(after)
		})
		assertUntouched(t, m, "taken-g1", theirs, before)
		if cs := getSet(t, ns, "taken"); cs.Status.KeyGeneration != 0 {
			t.Fatalf("the set provisioned generation %d on a user it does not own", cs.Status.KeyGeneration)
		}
		src := sourceData(t, getSet(t, ns, "taken"))
		if pw := string(src["password"]); pw != "" && m.CanAuthenticate("taken-g1", pw) == nil {
			t.Fatal("taken-g1 accepts the password rekey minted")
		}
		deleteSetAndWait(t, ns, "taken")
		assertUntouched(t, m, "taken-g1", theirs, before)
		t.Logf("taken-g1: refused with NotOwned, unchanged and kept after the set's deletion")
	})

	t.Run("users of the pattern rekey did not make", func(t *testing.T) {
		cs := rabbitSet(t, ns, "swept", m)
		// amqps when asked: the distributed transport_url is amqps:// and
		// logs in over TLS.
		cs.Spec.RabbitMQ.TransportURL = &v1.RabbitMQTransportURL{Scheme: "amqps", Hosts: []string{m.AMQPSAddr()}}
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
		cs = waitPhase(t, ns, "swept", v1.PhaseIdle, 1)
		mark := rabbitmq.OwnerTag(string(cs.UID))
		// Generation names taken by another set (its mark) and by someone
		// who knows nothing of rekey (no mark): the orphan sweep at
		// rotation, the retirement and the deletion must pass them by.
		const other = "other-password-0123456789"
		putForeignUser(t, m, "swept-g5", other, "management", rabbitmq.OwnerTag("11111111-2222-4333-8444-555555555555"))
		putForeignUser(t, m, "swept-g6", other)
		foreign := map[string]brokerUser{"swept-g5": readBrokerUser(t, m, "swept-g5"), "swept-g6": readBrokerUser(t, m, "swept-g6")}

		rotate(t, ns, "swept", "r1")
		waitPhase(t, ns, "swept", v1.PhaseDistributed, 1)
		discard(t, ns, "swept", "r1") // no consumers: AfterRollout would hold it
		cs = waitPhase(t, ns, "swept", v1.PhaseIdle, 2)
		if got := rabbitUsers(t, m, "swept"); !slices.Equal(got, []string{"swept-g2", "swept-g5", "swept-g6"}) {
			t.Fatalf("after the rotation the broker has %v: want swept-g2 (current) and the two users rekey did not make", got)
		}
		for u, before := range foreign {
			assertUntouched(t, m, u, other, before)
		}
		assertPermissions(t, m, cs, "swept-g2")
		data := secretData(t, ns, "swept-transport")
		user, pw := string(data["username"]), string(data["password"])
		if user != "swept-g2" || !slices.Contains(readBrokerUser(t, m, user).tags, mark) {
			t.Fatalf("the current user %s lacks the mark %s", user, mark)
		}
		if err := m.CanAuthenticate(user, pw); err != nil {
			t.Fatalf("AMQP login as %s: %v", user, err)
		}
		if who, err := m.ClientAs(user, pw).Whoami(); err != nil || who.Name != user {
			t.Fatalf("https management API login as %s: %+v, %v", user, who, err)
		}
		u, err := url.Parse(string(data["transport_url"]))
		if err != nil {
			t.Fatal(err)
		}
		if upw, _ := u.User.Password(); u.Scheme != "amqps" || u.Host != m.AMQPSAddr() || u.User.Username() != user || upw != pw {
			t.Fatalf("transport_url is not amqps://%s@%s (scheme %s, host %s)", user, m.AMQPSAddr(), u.Scheme, u.Host)
		}
		if err := m.CanAuthenticateTLS(user, pw); err != nil {
			t.Fatalf("AMQPS login with the transport_url's credentials: %v", err)
		}

		deleteSetAndWait(t, ns, "swept")
		if got := rabbitUsers(t, m, "swept"); !slices.Equal(got, []string{"swept-g5", "swept-g6"}) {
			t.Fatalf("after the set's deletion the broker has %v: want only the users rekey did not make", got)
		}
		for u, before := range foreign {
			assertUntouched(t, m, u, other, before)
		}
		t.Logf("swept: rotated and deleted; swept-g5 (another set's) and swept-g6 (unmarked) kept and unchanged")
	})

	t.Run("adopting the user services used before rekey", func(t *testing.T) { testRabbitMQAdopt(t, m, ns) })
	t.Run("a set making another's users on the same cluster", func(t *testing.T) { testRabbitMQSameUsers(t, m, ns) })
	t.Run("a squatter that never provisions", func(t *testing.T) { testRabbitMQNoSquatting(t, m, ns) })
}

// testRabbitMQNoSquatting: a set created first, in another namespace, with
// an admin credential that does not work, holds no user base: the working
// set created after it with the same base provisions, and neither set's
// messages name the other's namespace.
func testRabbitMQNoSquatting(t *testing.T, m *testenv.RabbitMQ, ns string) {
	other := newNamespace(t)
	squatter := rabbitSet(t, other, "squat", m)
	createSecret(t, other, "squat-bogus", map[string]string{"username": m.AdminUser, "password": "not-the-admin-password"})
	squatter.Spec.RabbitMQ.Admin.SecretRef.Name = "squat-bogus"
	if err := k8s.Create(ctxT(t), squatter); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), getSet(t, other, "squat"))
		if left := waitSetsGone(k8s, other, 30*time.Second, dropAllFinalizers); len(left) > 0 {
			t.Errorf("sets %v left", left)
		}
	})
	squatMsg := waitDegraded(t, other, "squat", reason.AuthenticationFailed)

	legit := rabbitSet(t, ns, "squat", m)
	if err := k8s.Create(ctxT(t), legit); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "squat", v1.PhaseIdle, 1)
	if got := rabbitUsers(t, m, "squat"); !slices.Equal(got, []string{"squat-g1"}) {
		t.Fatalf("the broker has %v, want the working set's squat-g1", got)
	}
	if c := condition(cs, reason.CondDegraded); c != nil && c.Status == metav1.ConditionTrue {
		t.Fatalf("the working set is degraded: %s: %s", c.Reason, c.Message)
	}
	if s := getSet(t, other, "squat"); s.Status.KeyGeneration != 0 || strings.Contains(squatMsg, ns) {
		t.Fatalf("the squatter: generation %d, message %q (must name nothing of %s)", s.Status.KeyGeneration, squatMsg, ns)
	}
	deleteSetAndWait(t, ns, "squat")
}

// TestRabbitMQPlaintextOptIn: with allowPlaintextHTTP a set works over the
// management API's plain http listener, and says it is insecure (a
// Warning naming the field, TransportVerified=False); the same broker over
// https with its CA is reported verified.
func TestRabbitMQPlaintextOptIn(t *testing.T) {
	m := testenv.RabbitMQForTest(t)
	startManager(t, cp.Config)
	ns := newNamespace(t)
	plain := rabbitSet(t, ns, "plain", m)
	plain.Spec.RabbitMQ.Endpoint, plain.Spec.RabbitMQ.AllowPlaintextHTTP, plain.Spec.RabbitMQ.TLS = m.MgmtHTTPURL, true, nil
	if err := k8s.Create(ctxT(t), plain); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctxT(t), rabbitSet(t, ns, "verified", m)); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "plain", v1.PhaseIdle, 1)
	assertTransport(t, secretData(t, ns, "plain-transport"), m, "plain-g1")
	note := waitEvent(t, ns, "plain", string(reason.InsecureTransport))
	mustContain(t, "InsecureTransport event", note, "spec.rabbitmq.allowPlaintextHTTP", "unencrypted", m.MgmtHTTPURL)
	eventually(t, 30*time.Second, "TransportVerified False on plain, True on verified", func() (bool, string) {
		p := condition(getSet(t, ns, "plain"), reason.CondTransportVerified)
		v := condition(getSet(t, ns, "verified"), reason.CondTransportVerified)
		return p != nil && p.Status == "False" && strings.Contains(p.Message, "allowPlaintextHTTP") && v != nil && v.Status == "True",
			fmt.Sprint(p, " / ", v)
	})
	waitPhase(t, ns, "verified", v1.PhaseIdle, 1)
	rotate(t, ns, "plain", "r1")
	waitPhase(t, ns, "plain", v1.PhaseDistributed, 1)
	discard(t, ns, "plain", "r1") // no consumers: AfterRollout would hold it
	waitPhase(t, ns, "plain", v1.PhaseIdle, 2)
	assertTransport(t, secretData(t, ns, "plain-transport"), m, "plain-g2")
}
