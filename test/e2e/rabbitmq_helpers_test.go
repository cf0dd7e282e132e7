package e2e

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/plugin"
	"rekey.io/rekey/internal/testenv"
)

// rabbitSet is a RabbitMQ set whose consumers are external groups, as
// OpenStack's compute nodes are; old users retire by themselves once every
// member of every set on the broker moved.
func rabbitSet(t testing.TB, ns, name string, m *testenv.RabbitMQ, groups ...v1.ConsumerGroup) *v1.CredentialSet {
	t.Helper()
	createSecret(t, ns, name+"-admin", map[string]string{"username": m.AdminUser, "password": m.AdminPassword})
	// https verified against the CA the test node's certificate was made
	// with, as a set in a cluster names its broker's CA.
	createSecret(t, ns, name+"-ca", map[string]string{"ca.crt": string(m.CAPEM)})
	return &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CredentialSetSpec{
			RabbitMQ: &v1.RabbitMQSpec{
				Endpoint: m.MgmtURL,
				TLS:      &v1.RabbitMQTLS{CASecretRef: &v1.SecretKeyRef{Name: name + "-ca", Key: "ca.crt"}},
				Admin:    v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: name + "-admin"}},
				User: v1.RabbitMQUser{
					Base: name, Tags: []string{"management"},
					Permissions:      []v1.RabbitMQPermission{{Vhost: "/", Configure: "^" + name + `\.`, Write: ".*", Read: ".*"}},
					TopicPermissions: []v1.RabbitMQTopicPermission{{Vhost: "/", Exchange: "amq.topic", Write: "^" + name + `\.`, Read: ".*"}},
				},
				TransportURL: &v1.RabbitMQTransportURL{Hosts: []string{m.AMQPAddr()}},
				ConfigFile:   &v1.RabbitMQConfigFile{Key: "01-nova.conf"},
			},
			Distribution:   []v1.SecretTarget{{Namespace: ns, Name: name + "-transport"}},
			ConsumerGroups: groups,
			Rotation: v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout,
				GracePeriod: &metav1.Duration{Duration: time.Second}},
		},
	}
}

// fleet plays the members of consumer groups: each holds the credentials
// it was last deployed with and logs in with them continuously, as a
// compute node's service does. Not one login may fail.
type fleet struct {
	m       *testenv.RabbitMQ
	mu      sync.Mutex
	creds   map[string][2]string // member → user, password
	logins  int
	failed  []string
	stop    chan struct{}
	stopped chan struct{}
}

func startFleet(t testing.TB, m *testenv.RabbitMQ) *fleet {
	f := &fleet{m: m, creds: map[string][2]string{}, stop: make(chan struct{}), stopped: make(chan struct{})}
	go f.loop()
	t.Cleanup(f.halt)
	return f
}

func (f *fleet) halt() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
		<-f.stopped
	}
}

func (f *fleet) loop() {
	defer close(f.stopped)
	for {
		select {
		case <-f.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		f.mu.Lock()
		snapshot := make(map[string][2]string, len(f.creds))
		for k, v := range f.creds {
			snapshot[k] = v
		}
		f.mu.Unlock()
		for member, c := range snapshot {
			err := f.m.CanAuthenticate(c[0], c[1])
			f.mu.Lock()
			f.logins++
			if err != nil {
				f.failed = append(f.failed, fmt.Sprintf("%s as %s: %v", member, c[0], err))
			}
			f.mu.Unlock()
		}
	}
}

// deploy gives members what the distribution Secret holds now, as outside
// automation would, and returns the secret hash it deployed.
func (f *fleet) deploy(t testing.TB, ns, secret string, members ...string) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: secret}, s); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, mb := range members {
		f.creds[mb] = [2]string{string(s.Data["username"]), string(s.Data["password"])}
	}
	return s.Annotations[naming.SecretHashAnnotation]
}

func (f *fleet) assertNoGap(t testing.TB) {
	t.Helper()
	f.halt()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logins == 0 {
		t.Fatal("the fleet made no login attempt")
	}
	if len(f.failed) > 0 {
		t.Fatalf("%d of %d fleet logins failed, first: %s", len(f.failed), f.logins, f.failed[0])
	}
	t.Logf("fleet: %d logins, 0 failed", f.logins)
}

// ack runs kubectl rekey ack through the plugin.
func ack(t testing.TB, ns, set, group, hash string, members ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	args := []string{"--kubeconfig", cp.Kubeconfig, "-n", ns, "ack", set, "--group", group, "--members", strings.Join(members, ",")}
	if hash != "" {
		args = append(args, "--secret-hash", hash)
	}
	if code := plugin.Main(context.Background(), args, plugin.Options{Out: &out, Err: &errb}); code != 0 {
		return out.String(), fmt.Errorf("kubectl rekey ack: %s", strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// rabbitUsers lists the broker's users of base, sorted.
func rabbitUsers(t testing.TB, m *testenv.RabbitMQ, base string) []string {
	t.Helper()
	users, err := m.Client().ListUsers()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range users {
		if strings.HasPrefix(u.Name, base+"-g") {
			out = append(out, u.Name)
		}
	}
	slices.Sort(out)
	return out
}

// groupCoverage is status's coverage of group g ("" when absent).
func groupCoverage(cs *v1.CredentialSet, g string) string {
	for _, c := range cs.Status.Consumers {
		if c.Kind == v1.KindGroup && c.Name == g {
			return c.Coverage
		}
	}
	return ""
}

// assertStoredUsers is "stored before applied" for RabbitMQ: every user of base the broker
// has accepts a password the source Secret holds for that user name.
func assertStoredUsers(t testing.TB, when string, m *testenv.RabbitMQ, cs *v1.CredentialSet) {
	t.Helper()
	src := sourceData(t, cs)
	stored := map[string]string{}
	for _, suffix := range []string{"", engine.PendingSuffix} {
		if u := string(src["username"+suffix]); u != "" {
			stored[u] = string(src["password"+suffix])
		}
	}
	for _, u := range rabbitUsers(t, m, cs.Spec.RabbitMQ.User.Base) {
		pw, ok := stored[u]
		if !ok {
			t.Fatalf("%s: user %s exists but the source Secret holds no password for it", when, u)
		}
		if err := m.CanAuthenticate(u, pw); err != nil {
			t.Fatalf("%s: user %s refuses the password the source Secret holds: %v", when, u, err)
		}
	}
}
