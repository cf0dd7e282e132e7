package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// mocoKeys maps MOCO's Secret keys to its users.
var mocoKeys = map[string]string{
	"ADMIN_PASSWORD": "moco-admin", "AGENT_PASSWORD": "moco-agent", "REPLICATION_PASSWORD": "moco-repl",
	"CLONE_DONOR_PASSWORD": "moco-clone-donor", "EXPORTER_PASSWORD": "moco-exporter", "BACKUP_PASSWORD": "moco-backup",
	"READONLY_PASSWORD": "moco-readonly", "WRITABLE_PASSWORD": "moco-writable",
}

// mocoSet is a moco-preset CredentialSet for the cluster whose admin
// (moco-admin) already exists with the password in Secret <name>-init.
func mocoSet(t testing.TB, ns, name string, c *testenv.MySQLCluster) *v1.CredentialSet {
	t.Helper()
	adminPw := "Init" + strings.Repeat("x", 30) + name
	prepareAdmin(t, c.Instances(), "moco-admin", adminPw)
	createSecret(t, ns, name+"-init", map[string]string{"ADMIN_PASSWORD": adminPw})
	return &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances:      v1.MySQLInstances{Hosts: c.Addrs()},
				Admin:          v1.MySQLAdmin{User: "moco-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: name + "-init", Key: "ADMIN_PASSWORD"}},
				Preset:         "moco",
				TLSCASecretRef: mysqlCASecret(t, ns, name+"-ca"),
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-creds"}},
		},
	}
}

// mysqlCASecret creates Secret ns/name holding the CA of the harness's
// servers under ca.crt, and returns the reference a set verifies TLS with
// (tls: Required is the default).
// appUserSet is a set rotating one application user, name, through a
// separate admin (ops-admin, which rekey never rotates), distributed to
// <name>-db; the caller adds consumers or policy before creating it.
func appUserSet(t testing.TB, ns, name string, c *testenv.MySQLCluster, grants ...v1.MySQLGrant) *v1.CredentialSet {
	t.Helper()
	prepareAdmin(t, c.Instances(), "ops-admin", "ops-admin-password-for-tests")
	cs := preparedAdminSet(t, ns, name, c)
	cs.Spec.MySQL.Users[0].Grants = grants
	return cs
}

// preparedAdminSet is appUserSet for a cluster whose admin was prepared
// once (prepareAdmin), for tests that make sets in several namespaces.
func preparedAdminSet(t testing.TB, ns, name string, c *testenv.MySQLCluster) *v1.CredentialSet {
	t.Helper()
	createSecret(t, ns, "ops-admin", map[string]string{"password": opsAdminPassword})
	return &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances:      v1.MySQLInstances{Hosts: c.Addrs()},
				Admin:          v1.MySQLAdmin{User: "ops-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "ops-admin", Key: "password"}},
				TLSCASecretRef: mysqlCASecret(t, ns, "mysql-ca"),
				Users:          []v1.MySQLUser{{Name: name}},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-db"}},
		},
	}
}

func mysqlCASecret(t testing.TB, ns, name string) *v1.SecretKeyRef {
	t.Helper()
	ca, err := testenv.MySQLCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	createSecret(t, ns, name, map[string]string{"ca.crt": string(ca)})
	return &v1.SecretKeyRef{Name: name, Key: "ca.crt"}
}

// userPasswords maps user name → password from Secret data keyed like MOCO.
func userPasswords(data map[string][]byte, keys map[string]string, suffix string) map[string]string {
	out := map[string]string{}
	for k, u := range keys {
		if v, ok := data[k+suffix]; ok {
			out[u] = string(v)
		}
	}
	return out
}

// loginMatrix asserts, for every user × instance, that MySQL accepts the
// passwords in accept and refuses those in refuse.
func loginMatrix(t testing.TB, when string, insts []*testenv.MySQLInstance, accept, refuse map[string]string) {
	t.Helper()
	var mu sync.Mutex
	var bad []string
	var wg sync.WaitGroup
	check := func(i *testenv.MySQLInstance, user, pw string, want bool) {
		defer wg.Done()
		err := i.CanLogin(user, pw)
		if (err == nil) != want {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%s on %s: login ok=%v, want %v", user, i.Name, err == nil, want))
			mu.Unlock()
		}
	}
	for _, i := range insts {
		for u, pw := range accept {
			wg.Add(1)
			go check(i, u, pw, true)
		}
		for u, pw := range refuse {
			wg.Add(1)
			go check(i, u, pw, false)
		}
	}
	wg.Wait()
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("login matrix %s:\n%s", when, strings.Join(bad, "\n"))
	}
	observed(t, "logins %s: %d accepted, %d refused, as required", when, len(insts)*len(accept), len(insts)*len(refuse))
}

// prober logs in continuously as a consumer would: with whatever the
// distributed Secret holds at that moment, on every instance.
type prober struct {
	attempts, failures atomic.Int64
	mu                 sync.Mutex
	firstFailures      []string
	stop               chan struct{}
	done               chan struct{}
}

func startProber(t testing.TB, insts []*testenv.MySQLInstance, ns, secret string, keys map[string]string) *prober {
	return probeLoop(t, ns, secret, keys, func() []*testenv.MySQLInstance { return insts }, nil, nil)
}

// probeLoop is the prober's loop: every round it reads the distributed
// Secret and logs in as every user of keys, with what the Secret holds, on
// every instance targets returns. counted, when set, says whether a failed
// attempt counts at all (an instance stopped on purpose is not a refused
// login); afterRound, when set, runs after each round.
func probeLoop(t testing.TB, ns, secret string, keys map[string]string, targets func() []*testenv.MySQLInstance,
	counted func(error) bool, afterRound func()) *prober {
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			s := &corev1.Secret{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: secret}, s); err != nil {
				continue
			}
			var wg sync.WaitGroup
			for k, u := range keys {
				pw := string(s.Data[k])
				for _, i := range targets() {
					wg.Go(func() { p.record(u, i.Name, i.CanLogin(u, pw), counted) })
				}
			}
			wg.Wait()
			if afterRound != nil {
				afterRound()
			}
		}
	}()
	t.Cleanup(p.halt)
	return p
}

// record counts one login attempt and keeps the first failures.
func (p *prober) record(user, inst string, err error, counted func(error) bool) {
	if err != nil && counted != nil && !counted(err) {
		return
	}
	p.attempts.Add(1)
	if err == nil {
		return
	}
	p.failures.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.firstFailures) < 10 {
		p.firstFailures = append(p.firstFailures, fmt.Sprintf("%s %s on %s: %v", time.Now().Format("15:04:05.000"), user, inst, err))
	}
}

func (p *prober) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// assertNoGap stops the prober and fails the test on any refused login.
func (p *prober) assertNoGap(t testing.TB) {
	t.Helper()
	p.halt()
	t.Logf("prober: %d logins, %d failed", p.attempts.Load(), p.failures.Load())
	if p.attempts.Load() == 0 {
		t.Fatal("prober made no login attempt")
	}
	if p.failures.Load() > 0 {
		t.Fatalf("consumers were locked out %d times:\n%s", p.failures.Load(), strings.Join(p.firstFailures, "\n"))
	}
}

// userTable snapshots accounts with their authentication data.
func userTable(t testing.TB, i *testenv.MySQLInstance) string {
	t.Helper()
	v, err := i.QueryString("SELECT GROUP_CONCAT(CONCAT(User,'@',Host,':',HEX(authentication_string),':',COALESCE(CAST(User_attributes AS CHAR),'')) ORDER BY User, Host SEPARATOR ';') FROM mysql.user")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func gtidExecuted(t testing.TB, i *testenv.MySQLInstance) string {
	t.Helper()
	v, err := i.QueryString("SELECT @@GLOBAL.gtid_executed")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func assertSuperReadOnly(t testing.TB, insts ...*testenv.MySQLInstance) {
	t.Helper()
	var names []string
	for _, i := range insts {
		if v, err := i.QueryString("SELECT @@GLOBAL.super_read_only"); err != nil || v != "1" {
			t.Fatalf("%s: super_read_only = %q (%v), want 1", i.Name, v, err)
		}
		names = append(names, i.Name)
	}
	observed(t, "super_read_only=1 on %s", strings.Join(names, ", "))
}

// opsAdminPassword is the password preparedAdminSet's admin logs in with.
const opsAdminPassword = "ops-admin-password-for-tests"

// reinitWithOpsAdmin rebuilds replica from an empty data directory, its
// bootstrap creating preparedAdminSet's admin (what a cluster manager's
// does), and nothing rekey made.
func reinitWithOpsAdmin(t testing.TB, replica, primary *testenv.MySQLInstance) {
	t.Helper()
	if err := replica.Reinit(primary, testenv.ReinitOptions{Bootstrap: []string{
		fmt.Sprintf("CREATE USER 'ops-admin'@'%%' IDENTIFIED BY '%s'", opsAdminPassword),
		"GRANT ALL PRIVILEGES ON *.* TO 'ops-admin'@'%' WITH GRANT OPTION",
	}}); err != nil {
		t.Fatal(err)
	}
}

// rebuildReplica rebuilds c's first replica from an empty data directory
// (reinitWithOpsAdmin), out of targets meanwhile (the consumers do not log
// in there), then runs wake (nil: nothing; a set may need a nudge rather
// than wait for its resync) and waits until the replica accepts every
// password of want, user by user, as the sets' repairs give them back;
// then it is a target again. when is what the sets were doing, for the
// trace.
func rebuildReplica(t *testing.T, c *testenv.MySQLCluster, targets *probeTargets, when string, wake func(), want ...map[string]string) {
	t.Helper()
	replica := c.Replicas[0]
	targets.remove(replica)
	reinitWithOpsAdmin(t, replica, c.Primary)
	observed(t, "the replica rebuilt empty %s", when)
	if wake != nil {
		wake()
	}
	// A deleted set looks again every 30 s, nothing else wakes it.
	waitFor(t, 3*time.Minute, "the rebuilt replica given the sets' users with their passwords", func() (bool, string) {
		for _, m := range want {
			for name, pw := range m {
				if err := replica.CanLogin(name, pw); err != nil {
					return false, name + ": " + err.Error()
				}
			}
		}
		return true, ""
	})
	targets.add(replica)
}
