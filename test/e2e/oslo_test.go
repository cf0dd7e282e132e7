package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// osloService is one OpenStack service process (testdata/oslo_rpc.py): an
// oslo.messaging RPC server and client that read the distributed Secret's
// 01-nova.conf once, when they start, and keep it until they are stopped.
type osloService struct {
	name   string
	user   string // what it read; not secret
	cmd    *exec.Cmd
	ready  chan struct{}
	done   chan struct{}
	result struct {
		Calls      int    `json:"calls"`
		Failed     int    `json:"failed"`
		FirstError string `json:"first_error"`
	}
	once sync.Once
}

// startOslo starts a service with what secret holds now, and waits until
// its first RPC call came back.
func startOslo(t *testing.T, py, ns, secret, topic, name string) *osloService {
	t.Helper()
	data := secretData(t, ns, secret)
	dir := t.TempDir()
	conf := filepath.Join(dir, "01-nova.conf")
	if err := os.WriteFile(conf, data["01-nova.conf"], 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	s := &osloService{name: name, user: string(data["username"]), ready: make(chan struct{}), done: make(chan struct{})}
	s.cmd = exec.Command(py, "testdata/oslo_rpc.py", conf, topic, name)
	s.cmd.Stderr = stderr // oslo's own log; may name hosts, stays in the temp dir
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			if line["ready"] == true {
				s.once.Do(func() { close(s.ready) })
				continue
			}
			_ = json.Unmarshal(sc.Bytes(), &s.result)
		}
		_ = s.cmd.Wait()
		stderr.Close()
	}()
	t.Cleanup(func() { s.stop(t) })
	sum := sha256.Sum256([]byte(data["transport_url"]))
	select {
	case <-s.ready:
		t.Logf("%s started as %s (transport_url sha256 %x…)", name, s.user, sum[:6])
	case <-s.done:
		t.Fatalf("%s (as %s) exited before its first RPC call came back; its stderr ends:\n%s", name, s.user, redactedTail(filepath.Join(dir, "stderr"), string(data["password"])))
	case <-time.After(45 * time.Second):
		t.Fatalf("%s (as %s): no RPC call came back in 45s; its stderr ends:\n%s", name, s.user, redactedTail(filepath.Join(dir, "stderr"), string(data["password"])))
	}
	return s
}

// redactedTail is the end of a process's stderr without the password.
func redactedTail(path, password string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	out := strings.Join(lines, "\n")
	if password != "" {
		out = strings.ReplaceAll(out, password, "<redacted>")
	}
	return out
}

// stop sends SIGTERM, as a kubelet does, and waits for the counts.
func (s *osloService) stop(t *testing.T) {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Errorf("%s did not stop within 60s of SIGTERM", s.name)
	}
}

// TestOsloMessagingRPC runs real OpenStack RPC (Debian's oslo.messaging)
// through a rekey rotation and retirement: the service reads transport_url
// from rekey's Secret (01-nova.conf, two hosts, a vhost with "/", a space
// and non-ASCII letters) when it starts; the rollout after the rotation
// starts the new process and stops the old one, as a Deployment's rolling
// update does; the group is acknowledged; rekey deletes the old user. Not
// one RPC call may fail, on either process.
func TestOsloMessagingRPC(t *testing.T) {
	py := testenv.OsloPython(t)
	m := testenv.RabbitMQForTest(t)
	t.Logf("rabbitmq-server %s", m.Version)
	const vhost = "openstack/cell1 nova-é"
	if res, err := m.Client().PutVhost(vhost, rabbithole.VhostSettings{}); err != nil {
		t.Fatal(err)
	} else {
		res.Body.Close()
	}
	startManager(t, cp.Config)
	ns := newNamespace(t)
	group := v1.ConsumerGroup{Name: "compute", Members: []string{"compute-0"}}
	cs := rabbitSet(t, ns, "oslo", m, group)
	cs.Spec.RabbitMQ.User.Permissions = []v1.RabbitMQPermission{{Vhost: vhost, Configure: ".*", Write: ".*", Read: ".*"}}
	cs.Spec.RabbitMQ.User.TopicPermissions = nil
	// Two listeners naming the same node: the URL is oslo's several-host form.
	_, port, _ := net.SplitHostPort(m.AMQPAddr())
	cs.Spec.RabbitMQ.TransportURL.Hosts = []string{m.AMQPAddr(), net.JoinHostPort("localhost", port)}
	cs.Spec.RabbitMQ.TransportURL.Vhost = vhost
	cs.Spec.RabbitMQ.TransportURL.Query = "heartbeat_timeout_threshold=60" // query keys are [oslo_messaging_rabbit] options
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "oslo", v1.PhaseIdle, 1)
	topic := "rekey-" + strconv.FormatInt(time.Now().UnixNano(), 36)

	var all []*osloService
	cur := startOslo(t, py, ns, "oslo-transport", topic, "compute-0.r0")
	all = append(all, cur)
	if cur.user != "oslo-g1" {
		t.Fatalf("the first process logged in as %s, want oslo-g1", cur.user)
	}
	for i := 1; i <= 2; i++ {
		time.Sleep(2 * time.Second) // calls on the current generation alone
		rotate(t, ns, "oslo", fmt.Sprintf("r%d", i))
		waitPhase(t, ns, "oslo", v1.PhaseDistributed, int64(i))
		time.Sleep(2 * time.Second) // the old process keeps calling during the overlap
		// The rollout: the new process starts with the new Secret, then the
		// old one is stopped; both call through the broker meanwhile.
		next := startOslo(t, py, ns, "oslo-transport", topic, fmt.Sprintf("compute-0.r%d", i))
		all = append(all, next)
		if want := fmt.Sprintf("oslo-g%d", i+1); next.user != want {
			t.Fatalf("the restarted process logged in as %s, want %s", next.user, want)
		}
		time.Sleep(time.Second)
		cur.stop(t)
		cur = next
		if _, err := ack(t, ns, "oslo", group.Name, waitHash(t, ns, "oslo"), group.Members...); err != nil {
			t.Fatal(err)
		}
		waitPhase(t, ns, "oslo", v1.PhaseIdle, int64(i+1))
		old := fmt.Sprintf("oslo-g%d", i)
		eventually(t, 30*time.Second, old+" deleted", func() (bool, string) {
			u := rabbitUsers(t, m, "oslo")
			return !slices.Contains(u, old), strings.Join(u, ",")
		})
		time.Sleep(2 * time.Second) // calls after the old user's retirement
	}
	cur.stop(t)
	calls, failed := 0, 0
	for _, s := range all {
		calls += s.result.Calls
		failed += s.result.Failed
		t.Logf("%s as %s: %d RPC calls, %d failed", s.name, s.user, s.result.Calls, s.result.Failed)
		if s.result.Failed > 0 {
			t.Errorf("%s as %s: %d of %d RPC calls failed, first: %s", s.name, s.user, s.result.Failed, s.result.Calls, s.result.FirstError)
		}
		if s.result.Calls == 0 {
			t.Errorf("%s reported no calls", s.name)
		}
	}
	t.Logf("oslo.messaging RPC across 2 rotations and retirements: %d calls, %d failed", calls, failed)
}
