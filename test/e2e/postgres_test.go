package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestPostgresRotation rotates a PostgreSQL login on a real primary and
// streaming replica through the manager: the set provisions app_g1,
// rotates to app_g2 beside it, and retires app_g1 once its consumer is
// reported moved (discardPolicy AfterRollout), not before. Consumers
// that read the distribution Secret when they start and log in with it
// again and again, on both instances, are never refused; the old login
// role is gone from both after discard, and the set's deletion takes the
// current one.
func TestPostgresRotation(t *testing.T) {
	p := testenv.PostgresForTest(t)
	if err := p.Exec(p.Primary, "CREATE ROLE app_owner NOLOGIN", "GRANT CREATE ON SCHEMA public TO app_owner"); err != nil {
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
				Connection:     &v1.PostgresConnection{Host: "127.0.0.1", Port: int32(p.Primary.Port), DBName: "postgres"},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "app-db"}},
			// The consumer is reported by acks (kubectl rekey ack), as
			// automation outside Kubernetes does after restarting it.
			ConsumerGroups: []v1.ConsumerGroup{{Name: "web", Members: []string{"web-0"}}},
			Rotation: v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout,
				GracePeriod: &metav1.Duration{Duration: time.Second}},
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
	assertPgURI(t, p, g1)
	// pgbench's tables, made by the generation, belong to the group.
	if out, err := p.Pgbench(p.Primary, "app_g1", string(g1["password"]), "-i", "-s", "1", "-q"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	assertPgOwner(t, p, "pgbench_accounts", "app_owner")
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
	assertPgURI(t, p, g2)
	// The rollout gate: while the consumer has not moved, app_g1 stays.
	holdsFor(t, 2*time.Second, "app_g1 kept while the consumer has not moved", func() (bool, string) {
		cs := getSet(t, ns, "app")
		return cs.Status.Phase == v1.PhaseDistributed && len(pgRoles(t, p, "app_g1")) == 1, stateOf(cs)
	})
	// The consumer restarts, reads the new login, and is reported moved.
	c1.waitLogins(t, 20)
	c1.stop(t)
	c2 := startPgConsumer(t, p, g2)
	c2.waitLogins(t, 20)
	if _, err := ack(t, ns, "app", "web", waitHash(t, ns, "app"), "web-0"); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "app", v1.PhaseIdle, 2)
	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		if err := p.CanLogin(i, "app_g1", string(g1["password"])); err == nil {
			t.Fatalf("app_g1 still logs in on the %s after discard", i.Name)
		}
	}
	c2.waitLogins(t, c2.count()+20)
	c2.stop(t)
	assertPgOwner(t, p, "pgbench_accounts", "app_owner")
	assertNoSecretLeaked(t, ns, "app", map[string]string{"admin": p.AdminPassword,
		"app_g1": string(g1["password"]), "app_g2": string(g2["password"])})

	// Deleting the set (deletionPolicy Delete) while its consumer group may
	// still use app_g2 keeps the role; once the group is gone, the role
	// goes with the set.
	deleteWithPolicyDelete(t, ns, "app")
	if note := waitEvent(t, ns, "app", string(reason.UsersInUse)); !strings.Contains(note, "web") {
		t.Fatalf("UsersInUse must name the consumer group: %q", note)
	}
	if err := p.CanLogin(p.Primary, "app_g2", string(g2["password"])); err != nil {
		t.Fatalf("a set deleted while in use must keep its login: %v", err)
	}
	updateSpec(t, ns, "app", func(cs *v1.CredentialSet) { cs.Spec.ConsumerGroups = nil })
	eventually(t, time.Minute, "the set is deleted with its login role", func() (bool, string) {
		err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "app"}, &v1.CredentialSet{})
		login := p.CanLogin(p.Primary, "app_g2", string(g2["password"]))
		return apierrors.IsNotFound(err) && login != nil, fmt.Sprintf("get: %v, app_g2 login error: %v", err, login)
	})
}

// assertPgURI: the Secret is in CloudNativePG's layout, and its uri logs
// in as the login it names.
func assertPgURI(t testing.TB, p *testenv.Postgres, data map[string][]byte) {
	t.Helper()
	for _, k := range []string{"username", "password", "host", "port", "dbname", "uri", "jdbc-uri", "pgpass"} {
		if len(data[k]) == 0 {
			t.Fatalf("the distributed Secret lacks %s", k)
		}
	}
	cfg, err := pgx.ParseConfig(string(data["uri"]))
	if err != nil {
		t.Fatalf("uri does not parse: %v", err)
	}
	cfg.TLSConfig, cfg.Fallbacks = p.TLSConfig(), nil
	c, err := pgx.ConnectConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("the distributed uri does not log in: %v", err)
	}
	defer c.Close(ctxT(t))
	var who string
	if err := c.QueryRow(ctxT(t), "SELECT session_user").Scan(&who); err != nil || who != string(data["username"]) {
		t.Fatalf("the uri logs in as %q (%v), want %s", who, err, data["username"])
	}
}

func assertPgOwner(t testing.TB, p *testenv.Postgres, table, want string) {
	t.Helper()
	c, err := p.Admin(ctxT(t), p.Primary)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctxT(t))
	var owner string
	if err := c.QueryRow(ctxT(t), "SELECT tableowner FROM pg_tables WHERE tablename = $1", table).Scan(&owner); err != nil || owner != want {
		t.Fatalf("table %s is owned by %q (%v), want %s", table, owner, err, want)
	}
}

// TestAdmissionPostgres: the API server refuses malformed PostgreSQL sets
// with a message naming what to fix.
func TestAdmissionPostgres(t *testing.T) {
	ns := newNamespace(t)
	pg := func() *v1.CredentialSet {
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "pg-"},
			Spec: v1.CredentialSetSpec{Postgres: &v1.PostgresSpec{
				Hosts: []string{"app-1.app.team.svc:5432", "app-2.app.team.svc:5432"},
				Admin: v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
				Login: v1.PostgresLogin{Base: "app", Group: "app_owner"},
			}},
		}
	}
	for _, c := range []struct {
		name   string
		mutate func(*v1.CredentialSet)
		want   []string
	}{
		{"two backends", func(cs *v1.CredentialSet) {
			cs.Spec.RabbitMQ = &v1.RabbitMQSpec{Endpoint: "https://r:15671", Admin: v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "a"}}, User: v1.RabbitMQUser{Base: "n"}}
		}, []string{"set exactly one backend block", "spec.postgres"}},
		{"base ending like a generation", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Login.Base = "app_g3" }, []string{"spec.postgres.login.base", "_g<number>"}},
		{"upper-case base", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Login.Base = "App" }, []string{"spec.postgres.login.base"}},
		{"a pg_ group", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Login.Group = "pg_write_server_files" }, []string{"spec.postgres.login.group", "PostgreSQL's own"}},
		{"group named as the base", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Login.Group = "app" }, []string{"spec.postgres.login.group", "must differ"}},
		{"a CA with unverified TLS", func(cs *v1.CredentialSet) {
			cs.Spec.Postgres.TLS, cs.Spec.Postgres.TLSCASecretRef = "Require", &v1.SecretKeyRef{Name: "ca", Key: "ca.crt"}
		}, []string{"spec.postgres.tlsCASecretRef", "VerifyFull"}},
		{"unknown tls mode", func(cs *v1.CredentialSet) { cs.Spec.Postgres.TLS = "prefer" }, []string{"spec.postgres.tls", "VerifyFull"}},
		{"no hosts", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Hosts = nil }, []string{"spec.postgres.hosts"}},
		{"a host without a port", func(cs *v1.CredentialSet) { cs.Spec.Postgres.Hosts = []string{"db"} }, []string{"spec.postgres.hosts[0]"}},
		{"adopting the group", func(cs *v1.CredentialSet) {
			cs.Spec.Postgres.Adopt = &v1.PostgresAdopt{Role: "app_owner", PasswordSecretRef: v1.SecretKeyRef{Name: "legacy", Key: "password"}}
		}, []string{"spec.postgres.adopt.role", "the group"}},
		{"adopting a generation", func(cs *v1.CredentialSet) {
			cs.Spec.Postgres.Adopt = &v1.PostgresAdopt{Role: "app_g4", PasswordSecretRef: v1.SecretKeyRef{Name: "legacy", Key: "password"}}
		}, []string{"spec.postgres.adopt.role", "<login.base>_g<N>"}},
		{"connection without a database", func(cs *v1.CredentialSet) {
			cs.Spec.Postgres.Connection = &v1.PostgresConnection{Host: "app-rw"}
		}, []string{"spec.postgres.connection.dbname"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := pg()
			c.mutate(cs)
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
	cnpg := pg()
	cnpg.Spec.Postgres.Connection = &v1.PostgresConnection{Host: "app-rw.team.svc", DBName: "app"}
	cnpg.Spec.Postgres.TLSCASecretRef = &v1.SecretKeyRef{Name: "app-ca", Key: "ca.crt"}
	plain := pg()
	plain.Spec.Postgres.TLS = "Disable"
	adopt := pg()
	adopt.Spec.Postgres.Adopt = &v1.PostgresAdopt{Role: "app_gx", PasswordSecretRef: v1.SecretKeyRef{Name: "legacy", Key: "password"}}
	for _, cs := range []*v1.CredentialSet{pg(), cnpg, plain, adopt} {
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Errorf("well-formed spec %+v rejected: %v", cs.Spec.Postgres, err)
		}
	}
}

// pgConsumer runs pgbench, again and again, with what it read when it
// started: select-only transactions, each on a new connection (-C),
// alternating between the primary and the replica. Not one may fail.
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
			out, err := p.Pgbench(inst, user, pw, "-n", "-S", "-C", "-c", "2", "-t", "5")
			if err == nil && !strings.Contains(out, "number of failed transactions: 0 ") {
				err = fmt.Errorf("pgbench reports failures: %s", out)
			}
			c.mu.Lock()
			c.logins += 10
			if err != nil {
				c.failed = append(c.failed, fmt.Sprintf("%s on the %s: %v: %s", user, inst.Name, err, out))
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
		t.Fatalf("%d pgbench runs failed (of %d connections): %s", len(c.failed), c.logins, strings.Join(c.failed, "; "))
	}
	t.Logf("consumer: pgbench made %d connections, none refused", c.logins)
}

// pgRoles lists the roles whose names start with prefix.
func pgRoles(t testing.TB, p *testenv.Postgres, prefix string) []string {
	t.Helper()
	c, err := p.Admin(ctxT(t), p.Primary)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctxT(t))
	rows, err := c.Query(ctxT(t), "SELECT rolname FROM pg_roles WHERE starts_with(rolname, $1) ORDER BY rolname", prefix)
	if err != nil {
		t.Fatal(err)
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return roles
}
