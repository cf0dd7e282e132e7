package e2e

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// leaderFlags run a manager with leader election on short leases, so that
// a replica takes over a stopped leader within seconds.
var leaderFlags = []string{"--leader-elect", "--leader-elect-lease-duration=3s",
	"--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms"}

// takeoverLease, after leaderFlags, runs the replica that takes over: it
// still acquires as soon as the old leader's 3 s Lease expires (the
// duration its holder recorded is what counts), but renews with a 10 s
// deadline. With 2 s, on a machine loaded to 40, a new leader lost its own
// Lease to the slow API server and exited, and no manager was left to
// complete the scenario.
var takeoverLease = []string{"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s"}

// takeoverFlags are leaderFlags with takeoverLease.
func takeoverFlags(flags ...string) []string {
	return append(append(append([]string{}, leaderFlags...), flags...), takeoverLease...)
}

// TestPausedLeaderIsFenced runs two manager processes with leader
// election. The leader stops itself (SIGSTOP, as a long GC pause or a
// frozen VM would) right before it discards rotation r1's old password;
// the other replica takes over, completes r1 and, on request, applies
// rotation r2, so MySQL accepts r2's new password and r1's (the one
// consumers hold until they move). Then the old leader wakes up in the
// middle of its reconcile, with what it read before its pause, and would
// discard "the old password" — now r1's, which consumers still use. The
// fence (a check of the Lease right before each backend write) makes it
// stand down instead: both passwords still log in everywhere, status did
// not move back, and the old leader exits.
func TestPausedLeaderIsFenced(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	prepareAdmin(t, c.Instances(), "ops-admin", "ops-admin-password-for-tests")
	ns := newNamespace(t)
	keys := map[string]string{"HA_PASSWORD": "ha"}
	const pausePoint = "discard/discard-started"

	a := startManagerProcessWith(t, pausePoint+":pause", leaderFlags...)
	cs := preparedAdminSet(t, ns, "ha", c)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "ha", v1.PhaseIdle, 1) // a leads: it is the only one
	b := startManagerProcessWith(t, "", takeoverFlags()...)
	p := startProber(t, c.Instances(), ns, "ha-db", keys)
	mk := proberMark(t, p, "leader paused before a discard, wakes after the new leader completed it and applied the next rotation (fence: Lease and server side)")

	rotate(t, ns, "ha", "r1")
	cs = waitPhase(t, ns, "ha", v1.PhaseDistributed, 1)
	gen2 := userPasswords(sourceData(t, cs), keys, engine.PendingSuffix)
	discard(t, ns, "ha", "r1")
	waitPaused(t, a, pausePoint)
	paused := time.Now()

	// b takes over once a's Lease expires, and finishes r1.
	waitPhase(t, ns, "ha", v1.PhaseIdle, 2)
	t.Logf("takeover: the new leader completed r1 %s after the old one stopped (lease duration 3s)", time.Since(paused).Round(10*time.Millisecond))
	rotate(t, ns, "ha", "r2")
	cs = waitPhase(t, ns, "ha", v1.PhaseDistributed, 2)
	gen3 := userPasswords(sourceData(t, cs), keys, engine.PendingSuffix)
	loginMatrix(t, "r2 distributed by the new leader", c.Instances(), gen2, nil)
	loginMatrix(t, "r2 distributed by the new leader", c.Instances(), gen3, nil)
	before := cs.Status

	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.exited:
	case <-time.After(time.Minute):
		t.Fatal("the old leader did not exit within a minute of waking up")
	}
	log, _ := os.ReadFile(a.log)
	if !strings.Contains(string(log), "resumed") {
		t.Fatalf("the old leader never resumed past %s:\n%s", pausePoint, tail(string(log), 2000))
	}
	loginMatrix(t, "after the old leader woke up", c.Instances(), gen2, nil)
	loginMatrix(t, "after the old leader woke up", c.Instances(), gen3, nil)
	after := getSet(t, ns, "ha").Status
	if after.Phase != v1.PhaseDistributed || after.RotationID != "r2" || after.KeyGeneration != before.KeyGeneration || after.DiscardStarted {
		t.Fatalf("status moved after the old leader woke up: %s", stateOf(getSet(t, ns, "ha")))
	}
	if strings.Contains(string(log), "standing down") {
		observed(t, "the old leader stood down at the fence")
	}

	discard(t, ns, "ha", "r2")
	waitPhase(t, ns, "ha", v1.PhaseIdle, 3)
	loginMatrix(t, "r2 completed by the new leader", c.Instances(), gen3, gen2)
	mk.done(t, "the woken leader changes nothing and exits; the new leader completes both rotations; no login refused")
	p.assertNoGap(t)
	b.stop()
}

// waitPaused waits until m stopped itself at failpoint (state T).
func waitPaused(t testing.TB, m *managerProcess, failpoint string) {
	t.Helper()
	eventually(t, 5*time.Minute, "the manager paused at "+failpoint, func() (bool, string) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(m.cmd.Process.Pid) + "/stat")
		if err != nil {
			return false, err.Error()
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndex(s, ")")+1:])
		return len(f) > 0 && f[0] == "T", "state " + strings.Join(f[:1], "")
	})
}

// TestKilledLeaderTakeover: with two manager processes, the leader is
// killed mid-rotation (right after it stored the new password, before any
// instance learnt it); the other takes over once the Lease expires and
// completes the rotation, with no login refused to a prober that uses
// what the distribution Secret holds. The takeover time is reported: the
// goal is the lease duration plus one reconcile.
func TestKilledLeaderTakeover(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	keys := map[string]string{"TAKEOVER_PASSWORD": "takeover"}
	const killPoint = "rotate/pending-stored"

	a := startManagerProcessWith(t, killPoint, leaderFlags...)
	cs := appUserSet(t, ns, "takeover", c)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "takeover", v1.PhaseIdle, 1)
	gen1 := userPasswords(sourceData(t, cs), keys, "")
	startManagerProcessWith(t, "", takeoverFlags()...)
	p := startProber(t, c.Instances(), ns, "takeover-db", keys)
	mk := proberMark(t, p, "leader killed after storing the new password, a second replica takes over")

	rotate(t, ns, "takeover", "r1")
	a.waitKilled(t, killPoint)
	killed := time.Now()
	cs = waitPhase(t, ns, "takeover", v1.PhaseDistributed, 1)
	took := time.Since(killed)
	t.Logf("takeover: the new leader distributed r1 %s after the leader was killed (lease duration 3s)", took.Round(10*time.Millisecond))
	observed(t, "takeover after a kill: %s on a 3 s lease", took.Round(10*time.Millisecond))
	gen2 := userPasswords(sourceData(t, cs), keys, engine.PendingSuffix)
	loginMatrix(t, "Distributed by the new leader", c.Instances(), gen1, nil)
	loginMatrix(t, "Distributed by the new leader", c.Instances(), gen2, nil)
	discard(t, ns, "takeover", "r1")
	waitPhase(t, ns, "takeover", v1.PhaseIdle, 2)
	loginMatrix(t, "completed by the new leader", c.Instances(), gen2, gen1)
	mk.done(t, "the second replica takes over within the lease duration plus a reconcile and completes the rotation; no login refused")
	p.assertNoGap(t)
}
