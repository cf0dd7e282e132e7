package e2e

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// TestPausedLeaderStaleReset: the leader stops itself (SIGSTOP) with a
// session open on an instance, right before it changes accounts there —
// in the Reset of an aborted rotation r1, or in the discard of r1 — and is
// then cut off from the API server but not from MySQL (a frozen VM on a
// node that lost its route to the control plane). The other replica takes
// over, completes what the old one was doing, and applies rotation r2:
// MySQL accepts r2's new password and the current one, which consumers
// hold until they move. Then the old leader wakes up and goes on with what
// it planned before its pause: a reset IDENTIFIED BY the r1-era password
// (which takes r2's new password away), or a DISCARD OLD PASSWORD (which
// takes the current one away).
//
// With only the server-side fence (the set's lock and the leadership term
// recorded in MySQL), and with the full fence, the old leader changes
// nothing and both passwords keep logging in.
//
// Without any fence the old leader's stale change lands (the control
// runs, REKEY_HA_CONTROL=1, show that the scenario reaches the hazard).
// They are not run by default: whether the stale change lands then
// depends on how long the pause lasted — past the manager's 30 s MySQL
// read timeout, its paused sessions fail when it wakes — which a loaded
// machine decides.
func TestPausedLeaderStaleReset(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	prepareAdmin(t, c.Instances(), "ops-admin", "ops-admin-password-for-tests")
	type variant struct {
		name, unfenced string
		lockout        bool
	}
	variants := []variant{{"ServerSideFenceOnly", "lease", false}, {"Fenced", "", false}}
	if os.Getenv("REKEY_HA_CONTROL") == "1" {
		variants = append([]variant{{"Unfenced", "1", true}}, variants...)
	}
	for _, step := range []string{"reset", "discard"} {
		for _, v := range variants {
			t.Run(step+"/"+v.name, func(t *testing.T) {
				staleStep(t, c, "stale"+step[:1]+strings.ToLower(v.name[:4]), step, v.unfenced, v.lockout)
			})
		}
	}
}

// staleStep runs the scenario above for step (reset or discard).
func staleStep(t *testing.T, c *testenv.MySQLCluster, name, step, unfenced string, lockout bool) {
	ns := newNamespace(t)
	keys := map[string]string{strings.ToUpper(name) + "_PASSWORD": name}
	pausePoint := step + "/session-opened"
	env := []string{"REKEY_TEST_UNFENCED=" + unfenced}
	api := startAPIPartition(t)

	// With only the server-side fence, the row asserts that the woken
	// leader reaches it: held (":hold"), its elector waits until the
	// reconcile it was in ended, so that it cannot end the process before
	// the stale session's next statement (a loaded machine let it).
	mode := ":pause"
	if unfenced == "lease" {
		mode = ":hold"
	}
	a := startManagerProcessEnv(t, append(env, "KUBECONFIG="+api.kubeconfig), pausePoint+mode, leaderFlags...)
	cs := preparedAdminSet(t, ns, name, c)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, name, v1.PhaseIdle, 1) // a leads: it is the only one
	b := startManagerProcessEnv(t, env, "", takeoverFlags()...)
	defer b.stop()
	fence := map[string]string{"1": "none", "lease": "server side only", "": "Lease and server side"}[unfenced]
	var (
		p  *prober
		mk *scenarioMark
	)
	if !lockout {
		// The control run locks out on purpose; the others are rows of
		// the fault matrix, under a prober using what the Secret holds.
		p = startProber(t, c.Instances(), ns, name+"-db", keys)
		mk = proberMark(t, p, "leader paused in a "+step+" session on an instance and cut off from the API server, wakes after the new leader completed it and applied the next rotation (fence: "+fence+")")
	}

	rotate(t, ns, name, "r1")
	waitPhase(t, ns, name, v1.PhaseDistributed, 1)
	gen := int64(1) // the generation once b completed what a was doing
	if step == "reset" {
		annotate(t, ns, name, engine.AbortAnnotation, "r1")
	} else {
		discard(t, ns, name, "r1")
		gen = 2
	}
	waitPaused(t, a, pausePoint)
	api.partition()

	// b takes over once a's Lease expires, completes the reset or the
	// discard, and applies r2.
	if step == "reset" {
		waitReset(t, ns, name, gen)
	} else {
		waitPhase(t, ns, name, v1.PhaseIdle, gen)
	}
	rotate(t, ns, name, "r2")
	cs = waitPhase(t, ns, name, v1.PhaseDistributed, gen)
	// What consumers hold now: the current password until they move, r2's
	// new one after.
	current := userPasswords(sourceData(t, cs), keys, "")
	gen3 := userPasswords(sourceData(t, cs), keys, engine.PendingSuffix)
	loginMatrix(t, "r2 distributed by the new leader", c.Instances(), current, nil)
	loginMatrix(t, "r2 distributed by the new leader", c.Instances(), gen3, nil)

	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.exited: // its elector finds the Lease lost
	case <-time.After(2 * time.Minute):
		log, _ := os.ReadFile(a.log)
		t.Fatalf("the old leader did not exit within two minutes of waking up:\n%s", tail(string(log), 3000))
	}
	log, _ := os.ReadFile(a.log)
	if !strings.Contains(string(log), "resumed") {
		t.Fatalf("the old leader never resumed past %s:\n%s", pausePoint, tail(string(log), 2000))
	}

	var refusing []string
	for _, i := range c.Instances() {
		if i.CanLogin(name, gen3[name]) != nil || i.CanLogin(name, current[name]) != nil {
			refusing = append(refusing, i.Name)
		}
	}
	switch {
	case lockout && len(refusing) == 0:
		t.Fatalf("without a fence the woken leader's %s should have taken a password consumers hold away somewhere; the scenario no longer reaches the hazard", step)
	case lockout:
		observed(t, "without a fence, the woken leader's stale %s locked a password consumers hold out on %s", step, strings.Join(refusing, ", "))
		return
	case len(refusing) > 0:
		t.Fatalf("the woken leader's stale %s took a password consumers hold away on %s:\n%s", step, strings.Join(refusing, ", "), tail(string(log), 3000))
	}
	after := getSet(t, ns, name)
	if after.Status.Phase != v1.PhaseDistributed || after.Status.RotationID != "r2" {
		t.Fatalf("status moved after the old leader woke up: %s", stateOf(after))
	}
	switch {
	case unfenced != "lease" || strings.Contains(string(log), "elected later"):
	case sessionLost(string(log)):
		// A long pause (a loaded machine) cost the paused session its
		// connection (the manager's read timeout, or the server's answer
		// to a client it gave up on): it failed before the fence was
		// asked, which changes nothing either.
		observed(t, "the old leader's paused session had lost its connection when it woke; the fence was not reached")
	default:
		t.Fatalf("the old leader was not refused by the term MySQL records:\n%s", tail(string(log), 3000))
	}
	observed(t, "the woken leader changed nothing (fence: %s)", fence)

	discard(t, ns, name, "r2")
	waitPhase(t, ns, name, v1.PhaseIdle, gen+1)
	loginMatrix(t, "r2 completed by the new leader", c.Instances(), gen3, current)
	mk.done(t, "the woken leader changes nothing and exits; the new leader completes the "+step+" and the next rotation; no login refused")
	p.assertNoGap(t)
}

// apiPartition forwards TCP to the API server until partition(): then
// every connection is closed and new ones are accepted and never
// answered, as on a node cut off from the control plane.
type apiPartition struct {
	ln         net.Listener
	kubeconfig string // the admin kubeconfig, pointed at the partition

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func startAPIPartition(t testing.TB) *apiPartition {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &apiPartition{ln: ln}
	kc, err := os.ReadFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	server := strings.TrimSuffix(cp.Config.Host, "/")
	if !strings.Contains(string(kc), server) {
		t.Fatalf("the admin kubeconfig does not name %s", server)
	}
	p.kubeconfig = filepath.Join(t.TempDir(), "partitioned.kubeconfig")
	if err := os.WriteFile(p.kubeconfig, []byte(strings.ReplaceAll(string(kc), server, "https://"+ln.Addr().String())), 0o600); err != nil {
		t.Fatal(err)
	}
	upstream := strings.TrimPrefix(server, "https://")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !p.keep(c) {
				continue // partitioned: held open, never answered
			}
			go p.forward(c, upstream)
		}
	}()
	t.Cleanup(func() { ln.Close(); p.partition() })
	return p
}

// keep records c and says whether it may be forwarded.
func (p *apiPartition) keep(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
	return !p.cut
}

func (p *apiPartition) forward(c net.Conn, upstream string) {
	up, err := net.Dial("tcp", upstream)
	if err != nil || !p.keep(up) {
		c.Close()
		return
	}
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

// partition closes every connection and answers no new one.
func (p *apiPartition) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// sessionLost: the manager's log shows a MySQL connection that failed when
// it woke (what go-sql-driver logs then).
func sessionLost(log string) bool {
	for _, sign := range []string{"i/o timeout", "unexpected sequence nr", "unexpected EOF", "invalid connection", "connection reset by peer", "broken pipe"} {
		if strings.Contains(log, sign) {
			return true
		}
	}
	return false
}
