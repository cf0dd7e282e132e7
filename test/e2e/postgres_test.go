package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// TestPostgresRotation rotates a PostgreSQL login on a real primary and
// streaming replica through the manager: the set provisions app_g1,
// rotates to app_g2 beside it, and retires app_g1 at discard. Consumers
// that read the distribution Secret when they start and log in with it
// again and again, on both instances, are never refused; the old login
// role is gone from both after discard, and the set's deletion takes the
// current one.
func TestPostgresRotation(t *testing.T) {
	p := testenv.PostgresForTest(t)
	if err := p.Exec(p.Primary, "CREATE ROLE app_owner NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	startManager(t, cp.Config)
	ns := newNamespace(t)
	createSecret(t, ns, "pg-admin", map[string]string{"username": p.AdminUser, "password": p.AdminPassword})
	createSecret(t, ns, "pg-ca", map[string]string{"ca.crt": string(p.CAPEM)})
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: v1.CredentialSetSpec{
			Postgres: &v1.PostgresSpec{
				Hosts:          []string{p.Primary.Addr(), p.Replica.Addr()},
				Admin:          v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "pg-ca", Key: "ca.crt"},
				Login:          v1.PostgresLogin{Base: "app", Group: "app_owner"},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "app-db"}},
			Rotation:     v1.RotationSpec{DiscardPolicy: v1.DiscardManual},
		},
	}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "app", v1.PhaseIdle, 1)
	g1 := secretData(t, ns, "app-db")
	if string(g1["username"]) != "app_g1" {
		t.Fatalf("distributed username %q, want app_g1", g1["username"])
	}
	c1 := startPgConsumer(t, p, g1)

	rotate(t, ns, "app", "r1")
	waitPhase(t, ns, "app", v1.PhaseDistributed, 1)
	g2 := secretData(t, ns, "app-db")
	if string(g2["username"]) != "app_g2" || string(g2["password"]) == string(g1["password"]) {
		t.Fatalf("after the rotation the Secret names %q with a new password: %v", g2["username"], string(g2["password"]) != string(g1["password"]))
	}
	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		if err := p.CanLogin(i, "app_g2", string(g2["password"])); err != nil {
			t.Fatalf("app_g2 with the distributed password on the %s: %v", i.Name, err)
		}
	}
	// The consumer restarts, as a rollout would, and reads the new login.
	c1.waitLogins(t, 3)
	c1.stop(t)
	c2 := startPgConsumer(t, p, g2)
	c2.waitLogins(t, 3)

	discard(t, ns, "app", "r1")
	waitPhase(t, ns, "app", v1.PhaseIdle, 2)
	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		if err := p.CanLogin(i, "app_g1", string(g1["password"])); err == nil {
			t.Fatalf("app_g1 still logs in on the %s after discard", i.Name)
		}
	}
	c2.waitLogins(t, c2.count()+3)
	c2.stop(t)
	assertNoSecretLeaked(t, ns, "app", map[string]string{"admin": p.AdminPassword,
		"app_g1": string(g1["password"]), "app_g2": string(g2["password"])})

	if err := k8s.Delete(ctxT(t), getSet(t, ns, "app")); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the set is deleted with its login role", func() (bool, string) {
		err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "app"}, &v1.CredentialSet{})
		login := p.CanLogin(p.Primary, "app_g2", string(g2["password"]))
		return apierrors.IsNotFound(err) && login != nil, fmt.Sprintf("get: %v, app_g2 login error: %v", err, login)
	})
}

// pgConsumer logs in, again and again, with what it read when it started,
// alternating between the primary and the replica. Not one login may fail.
type pgConsumer struct {
	mu     sync.Mutex
	logins int
	failed []string
	quit   chan struct{}
	done   chan struct{}
}

func startPgConsumer(t testing.TB, p *testenv.Postgres, data map[string][]byte) *pgConsumer {
	user, pw := string(data["username"]), string(data["password"])
	c := &pgConsumer{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for n := 0; ; n++ {
			select {
			case <-c.quit:
				return
			default:
			}
			inst := p.Primary
			if n%2 == 1 {
				inst = p.Replica
			}
			err := p.CanLogin(inst, user, pw)
			c.mu.Lock()
			c.logins++
			if err != nil {
				c.failed = append(c.failed, fmt.Sprintf("%s on the %s: %v", user, inst.Name, err))
			}
			c.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { c.halt() })
	return c
}

func (c *pgConsumer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logins
}

func (c *pgConsumer) waitLogins(t testing.TB, n int) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("the consumer logged in %d times", n), func() (bool, string) {
		got := c.count()
		return got >= n, fmt.Sprint(got)
	})
}

var haltOnce sync.Map

func (c *pgConsumer) halt() {
	if _, done := haltOnce.LoadOrStore(c, true); !done {
		close(c.quit)
	}
	<-c.done
}

// stop ends the consumer and fails the test if any of its logins failed.
func (c *pgConsumer) stop(t testing.TB) {
	t.Helper()
	c.halt()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failed) > 0 {
		t.Fatalf("%d of %d consumer logins refused: %s", len(c.failed), c.logins, strings.Join(c.failed, "; "))
	}
	t.Logf("consumer: %d logins, none refused", c.logins)
}
