package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
)

const rabbitmqBin = "/usr/lib/rabbitmq/bin"

// RabbitMQ is a private rabbitmq-server node with the management plugin.
// Everything it owns (data, logs, config, Erlang cookie, epmd, a CA and a
// certificate made at its start) is its own, so nodes of parallel test
// packages never see each other.
type RabbitMQ struct {
	NodeName  string
	AMQPPort  int
	AMQPSPort int // AMQP over TLS, with the certificate MgmtURL serves
	// MgmtURL is the management API over https (https://127.0.0.1:port),
	// served with a certificate for 127.0.0.1 and localhost that CAPEM
	// signed: what a CredentialSet names by default.
	MgmtURL string
	// MgmtHTTPURL is the same API over plain http, for what must be
	// proven about plaintext (spec.rabbitmq.allowPlaintextHTTP).
	MgmtHTTPURL string
	// CAPEM is the CA that signed the node's certificate, for a
	// CredentialSet's tls.caSecretRef.
	CAPEM         []byte
	AdminUser     string
	AdminPassword string
	Version       string

	dir      string
	env      []string // for the server and every rabbitmqctl or epmd call
	epmd     *Process
	server   *Process
	stopOnce sync.Once
}

// StartRabbitMQ starts a node and waits until its management API answers.
func (e *Env) StartRabbitMQ() (*RabbitMQ, error) {
	for attempt := 1; ; attempt++ {
		m, err := e.startRabbitMQOnce()
		if err == nil || attempt == 5 || m == nil || !rabbitPortTaken(filepath.Join(m.dir, "rabbitmq.log")) {
			return m, err
		}
		// A port picked free was taken before the broker bound it (a server
		// of a test running beside this one): a race of the test machine,
		// not a failure; the next attempt picks other ports.
		_ = os.RemoveAll(m.dir)
	}
}

// rabbitPortTaken: the broker's log says a listener found its port in use.
func rabbitPortTaken(logPath string) bool {
	b, err := os.ReadFile(logPath)
	return err == nil && strings.Contains(string(b), "eaddrinuse")
}

func (e *Env) startRabbitMQOnce() (m *RabbitMQ, err error) {
	if err := e.requireFile(rabbitmqBin+"/rabbitmq-server", "rabbitmq-server"); err != nil {
		return nil, err
	}
	epmdPath, err := exec.LookPath("epmd")
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	dir, err := os.MkdirTemp("", "rekey-rabbitmq-")
	if err != nil {
		return nil, err
	}
	m = &RabbitMQ{dir: dir, AdminUser: "rekey-admin", AdminPassword: randHex(16)}
	defer func() {
		if err != nil {
			m.stop(true) // the error names the log
		}
	}()
	ports, err := FreePorts(6)
	if err != nil {
		return m, err
	}
	pki, err := newTestPKI(dir)
	if err != nil {
		return m, err
	}
	m.CAPEM = pki.caPEM
	m.AMQPPort, m.AMQPSPort = ports[0], ports[4]
	m.MgmtHTTPURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	m.MgmtURL = fmt.Sprintf("https://127.0.0.1:%d", ports[5])
	distPort, epmdPort := ports[2], ports[3]
	m.NodeName = filepath.Base(dir) + "@localhost"

	home := filepath.Join(dir, "home")
	// Loopback listeners only: the admin user's name is no secret. The
	// default user gets full permissions on the default vhost, /. The
	// management API listens twice, over https (what sets use) and http
	// (what the plaintext opt-in is proven on); AMQP too, plain and TLS.
	// Clients present no certificate: TLS here protects passwords in
	// flight, authentication stays the broker's password check.
	conf := fmt.Sprintf(`listeners.tcp.default = 127.0.0.1:%d
listeners.ssl.default = 127.0.0.1:%d
ssl_options.cacertfile = %[3]s
ssl_options.certfile = %[4]s
ssl_options.keyfile = %[5]s
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
management.tcp.ip = 127.0.0.1
management.tcp.port = %[6]d
management.ssl.ip = 127.0.0.1
management.ssl.port = %[7]d
management.ssl.cacertfile = %[3]s
management.ssl.certfile = %[4]s
management.ssl.keyfile = %[5]s
loopback_users = none
default_user = %[8]s
default_pass = %[9]s
default_user_tags.administrator = true
`, m.AMQPPort, m.AMQPSPort, pki.caFile, pki.certFile, pki.keyFile, ports[1], ports[5], m.AdminUser, m.AdminPassword)
	write := func(path, content string, mode os.FileMode) {
		if err == nil {
			err = os.WriteFile(path, []byte(content), mode)
		}
	}
	err = os.Mkdir(home, 0o700)
	write(filepath.Join(home, ".erlang.cookie"), randHex(20), 0o400) // Erlang insists on owner-only
	write(filepath.Join(dir, "enabled_plugins"), "[rabbitmq_management].\n", 0o644)
	write(filepath.Join(dir, "rabbitmq.conf"), conf, 0o600)
	// Shadows /etc/rabbitmq/rabbitmq-env.conf, which the scripts source.
	write(filepath.Join(dir, "rabbitmq-env.conf"), "", 0o644)
	if err != nil {
		return m, err
	}
	m.env = []string{
		"PATH=/usr/sbin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + home,
		"ERL_EPMD_PORT=" + strconv.Itoa(epmdPort),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(dir, "rabbitmq-env.conf"),
	}
	// epmd started by us rather than by the node: beam would start it as a
	// daemon that outlives a killed test binary.
	if m.epmd, err = startProcess(procSpec{
		name: "epmd " + m.NodeName, path: epmdPath, dir: dir, env: m.env,
		args:   []string{"-port", strconv.Itoa(epmdPort), "-address", "127.0.0.1"},
		logOut: filepath.Join(dir, "epmd.log"),
	}); err != nil {
		return m, err
	}
	if err := waitTCP(m.epmd, epmdPort, 10*time.Second); err != nil {
		return m, err
	}
	// The script under /usr/sbin would switch to the rabbitmq user, which
	// could not write our directory; as root we run the real one directly.
	// RUNNING_UNDER_SYSTEMD makes it exec the VM instead of forking it, so
	// beam.smp keeps Pdeathsig and dies with a killed test binary.
	if m.server, err = startProcess(procSpec{
		name: "rabbitmq " + m.NodeName, path: rabbitmqBin + "/rabbitmq-server", dir: dir,
		env: append(m.env[:len(m.env):len(m.env)], "RUNNING_UNDER_SYSTEMD=true",
			"RABBITMQ_NODENAME="+m.NodeName,
			"RABBITMQ_NODE_PORT="+strconv.Itoa(m.AMQPPort),
			"RABBITMQ_DIST_PORT="+strconv.Itoa(distPort),
			"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
			"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
			"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
			"RABBITMQ_LOGS=-",
			"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
			"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq.conf"),
			"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(dir, "advanced.config"),
		),
		logOut: filepath.Join(dir, "rabbitmq.log"),
	}); err != nil {
		return m, err
	}
	// The broker starts in seconds on an idle machine; make test runs four
	// test processes on 2 cores, where one start took just over 3 minutes.
	if err := m.waitManagement(6 * time.Minute); err != nil {
		return m, err
	}
	if want := e.Versions["RABBITMQ_SERIES"]; !strings.HasPrefix(m.Version, want) {
		return m, fmt.Errorf("rabbitmq-server %s is not the pinned %s*: run `make env` or update hack/env/versions.env", m.Version, want)
	}
	return m, nil
}

// RabbitMQForTest starts a node for the test and stops it when the test ends.
func RabbitMQForTest(t testing.TB) *RabbitMQ {
	t.Helper()
	e := Require(t)
	m, err := e.StartRabbitMQ()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	t.Logf("RabbitMQ %s: amqp %s, amqps %s, management %s and %s", m.Version, m.AMQPAddr(), m.AMQPSAddr(), m.MgmtURL, m.MgmtHTTPURL)
	return m
}

func (m *RabbitMQ) waitManagement(timeout time.Duration) error {
	c := m.Client()
	c.SetTimeout(5 * time.Second)
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if m.server.Exited() {
			return fmt.Errorf("%s exited while starting (log: %s)", m.server.Name, m.server.LogPath)
		}
		var ov *rabbithole.Overview
		if ov, err = c.Overview(); err == nil {
			m.Version = ov.RabbitMQVersion
			// The plain management listener and the AMQP ones start
			// apart from the https one.
			for _, port := range []int{m.AMQPPort, m.AMQPSPort, mustPort(m.MgmtHTTPURL)} {
				if err := waitTCP(m.server, port, time.Until(deadline)); err != nil {
					return err
				}
			}
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s: management API did not answer in %s: %v (log: %s)",
		m.server.Name, timeout, err, m.server.LogPath)
}

// Stop stops the node, its epmd and the processes they started, and
// removes the node's directory.
func (m *RabbitMQ) Stop() { m.stop(false) }

func (m *RabbitMQ) stop(keepDir bool) {
	m.stopOnce.Do(func() {
		if m.server != nil {
			// SIGTERM, which the broker takes as a shutdown: rabbitmqctl
			// stop booted an Erlang VM of its own for the same.
			m.server.Stop(45 * time.Second)
		}
		if m.epmd != nil {
			// Even when ours is gone: an Erlang node that finds no epmd on
			// the port starts a daemon there, which only -kill reaches.
			_ = m.run(10*time.Second, nil, "epmd", "-kill")
			m.epmd.Stop(5 * time.Second)
		}
		if !keepDir {
			os.RemoveAll(m.dir)
		}
	})
}

// Ctl runs rabbitmqctl against the node, as the broker's administrator
// would (e.g. a command a refusal tells them to run).
func (m *RabbitMQ) Ctl(args ...string) error {
	// The CLI is an Erlang node too: a distribution port of its own keeps
	// parallel calls out of the small shared default range.
	port, err := FreePort()
	if err != nil {
		return err
	}
	// The timeout only stops a CLI that hangs: at load 40 on 2 cores one
	// call took over 3 minutes (an Erlang VM booting to run one command).
	return m.run(15*time.Minute, []string{
		"RABBITMQ_CTL_DIST_PORT_MIN=" + strconv.Itoa(port),
		"RABBITMQ_CTL_DIST_PORT_MAX=" + strconv.Itoa(port),
	}, rabbitmqBin+"/rabbitmqctl", append([]string{"-n", m.NodeName}, args...)...)
}

func (m *RabbitMQ) run(timeout time.Duration, env []string, path string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env, cmd.Dir = append(m.env[:len(m.env):len(m.env)], env...), m.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w: %s", filepath.Base(path), args, err, out)
	}
	return nil
}

// Client is a management API client as the node's administrator, over
// https verified against the node's CA.
func (m *RabbitMQ) Client() *rabbithole.Client { return m.ClientAs(m.AdminUser, m.AdminPassword) }

// ClientAs is a management API client as user, over https verified
// against the node's CA.
func (m *RabbitMQ) ClientAs(user, password string) *rabbithole.Client {
	c, err := rabbithole.NewTLSClient(m.MgmtURL, user, password, m.Transport())
	if err != nil {
		panic(err) // MgmtURL is ours and always parses
	}
	c.SetTimeout(30 * time.Second)
	return c
}

func mustPort(rawURL string) int {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(rawURL, "http://"), "https://"))
	if err != nil {
		panic(err) // our own URL
	}
	n, _ := strconv.Atoi(port)
	return n
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
