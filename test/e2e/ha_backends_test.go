package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// pausedRow is one paused-leader scenario on one backend: the leader
// stops itself at failpoint while it rotates (r1), discards r1 or resets
// the backend after r1 was aborted, and is cut off from the API server.
// The other replica takes over, completes r1 (or the reset) and applies
// r2. The old one then wakes up with what it read before and goes on
// where it stopped, with only the backend's own fence between it and the
// servers (REKEY_TEST_UNFENCED=lease: its Lease is not asked).
type pausedRow struct {
	name      string
	failpoint string
	// inDiscard: the pause falls in r1's discard, not its rotation.
	inDiscard bool
	// inAbort: r1 is aborted once distributed; the pause falls in the
	// backend reset that ends the rollback.
	inAbort bool
	// unfenced makes the row the control: no fence at all
	// (REKEY_TEST_UNFENCED=1), and the woken leader's stale change must
	// take away something the source Secret holds, or the row no longer
	// reaches the hazard the fence guards against.
	unfenced bool
	// set is the set named name, DiscardManual, not yet created.
	set func(t *testing.T, ns, name string) *v1.CredentialSet
	// probe logs in with what the distribution Secret holds, throughout
	// (nil: no prober; an in-place Ceph key dies before it is distributed,
	// which consumers' live tickets bridge, so only refused is checked).
	probe func(t *testing.T, ns, name string) *prober
	// flags are the managers' extra flags.
	flags []string
	// refused lists the logins of what the source Secret holds (current
	// and pending) that the servers refuse.
	refused func(t *testing.T, data map[string][]byte) []string
	// reach: the woken leader must be refused by the backend's term (its
	// log says so), not just find nothing left to do.
	reach bool
	// lost, when set, recognises a log where the paused session had lost
	// its connection when the leader woke (a long pause on a loaded
	// machine): it failed before the fence was asked, changing nothing.
	lost func(log string) bool
	// settle, when set, waits before the control's leader wakes until the
	// backend holds nothing of the test's own that would stop its stale
	// change (PostgreSQL: the test's login checks, whose sessions a loaded
	// server may list a moment after the client closed them, and which a
	// drop waits for).
	settle func(t *testing.T, name string)
}

// label names r's subtest: its failpoint, and whether it is the control.
func (r pausedRow) label() string {
	if r.unfenced {
		return r.failpoint + "-unfenced"
	}
	return r.failpoint
}

// runPausedRow runs r and checks: no login of the prober refused, nothing
// consumers hold taken away when the old leader woke, status not moved
// back, and (reach) the old leader refused at the backend.
func runPausedRow(t *testing.T, r pausedRow) {
	ns := newNamespace(t)
	name := r.name
	env := []string{"REKEY_TEST_UNFENCED=lease"}
	api := startAPIPartition(t)
	flags := append(append([]string{}, leaderFlags...), r.flags...)
	aFlags := flags
	if r.unfenced {
		env = []string{"REKEY_TEST_UNFENCED=1"}
		// The woken leader's elector ends the process once it fails to
		// renew for the renew deadline: long enough here for its stale
		// step to land (the control shows what it does, not how fast it
		// exits), and few renewals, so that the pause rarely falls in one.
		aFlags = append(append([]string{}, flags...), "--leader-elect-lease-duration=20s",
			"--leader-elect-renew-deadline=18s", "--leader-elect-retry-period=5s")
	}
	// ":hold": woken, its elector waits until the reconcile it was in
	// ended, so that the stale step always makes its backend calls and
	// the fence (not a race with the elector) decides what they do; a
	// loaded machine let the elector end the process first.
	mode := ":hold"
	if r.unfenced {
		mode = ":pause" // the lengthened renew deadline lets its step land
	}
	a := startManagerProcessEnv(t, append(env, "KUBECONFIG="+api.kubeconfig), r.failpoint+mode, aFlags...)
	if err := k8s.Create(ctxT(t), r.set(t, ns, name)); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, name, v1.PhaseIdle, 1) // a leads: it is the only one
	b := startManagerProcessEnv(t, env, "", takeoverFlags(r.flags...)...)
	defer b.stop()
	step := "rotation"
	switch {
	case r.inDiscard:
		step = "discard"
	case r.inAbort:
		step = "reset after an abort"
	}
	var (
		p  *prober
		mk *scenarioMark
	)
	if r.probe != nil && !r.unfenced { // the control locks out on purpose
		p = r.probe(t, ns, name)
		mk = proberMark(t, p, "leader paused at "+r.failpoint+" in a "+step+" and cut off from the API server, wakes after the new leader completed it and applied the next rotation (fence: server side only)")
	}

	started := time.Now()
	rotate(t, ns, name, "r1")
	switch {
	case r.inDiscard:
		waitPhase(t, ns, name, v1.PhaseDistributed, 1)
		discard(t, ns, name, "r1")
	case r.inAbort:
		waitPhase(t, ns, name, v1.PhaseDistributed, 1)
		annotate(t, ns, name, engine.AbortAnnotation, "r1")
	}
	waitPaused(t, a, r.failpoint)
	api.partition()
	paused := time.Now()
	gen := int64(2) // once the new leader completed what the old one was doing
	switch {
	case r.inAbort:
		gen = 1
		waitReset(t, ns, name, gen)
	case r.inDiscard:
		waitPhase(t, ns, name, v1.PhaseIdle, gen)
	default:
		waitPhase(t, ns, name, v1.PhaseDistributed, 1)
		discard(t, ns, name, "r1")
		waitPhase(t, ns, name, v1.PhaseIdle, gen)
	}
	t.Logf("takeover: the new leader completed the %s of r1 %s after the old one stopped", step, time.Since(paused).Round(10*time.Millisecond))
	rotate(t, ns, name, "r2")
	cs := waitPhase(t, ns, name, v1.PhaseDistributed, gen)
	if bad := r.refused(t, sourceData(t, cs)); len(bad) > 0 {
		t.Fatalf("r2 distributed by the new leader, refused: %v", bad)
	}

	if r.unfenced {
		// What the woken leader takes away is read with nobody to put it
		// back: the new leader stops (a later repair would hide it).
		b.stop()
		if r.settle != nil {
			r.settle(t, name)
		}
	}
	woke := time.Now()
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.exited: // its elector finds the Lease lost
		t.Logf("the old leader exited %s after it woke", time.Since(woke).Round(10*time.Millisecond))
	case <-time.After(2 * time.Minute):
		log, _ := os.ReadFile(a.log)
		t.Fatalf("the old leader did not exit within two minutes of waking up:\n%s", tail(string(log), 3000))
	}
	log, _ := os.ReadFile(a.log)
	if !strings.Contains(string(log), "resumed") {
		t.Fatalf("the old leader never resumed past %s:\n%s", r.failpoint, tail(string(log), 2000))
	}
	bad := r.refused(t, sourceData(t, cs))
	switch {
	case r.unfenced && len(bad) == 0:
		t.Fatalf("without a fence the woken leader's stale %s should have taken away something the source Secret holds; the row no longer reaches the hazard:\n%s", step, tail(string(log), 3000))
	case r.unfenced:
		t.Logf("control: without a fence, the woken leader's stale %s took away %s (row took %s)",
			step, strings.Join(bad, "; "), time.Since(started).Round(time.Second))
		return
	case len(bad) > 0:
		t.Fatalf("after the old leader woke up, refused: %v\n%s", bad, tail(string(log), 3000))
	}
	after := getSet(t, ns, name)
	if after.Status.Phase != v1.PhaseDistributed || after.Status.RotationID != "r2" || after.Status.KeyGeneration != cs.Status.KeyGeneration {
		t.Fatalf("status moved after the old leader woke up: %s", stateOf(after))
	}
	switch {
	case strings.Contains(string(log), "elected later"):
		observed(t, "the woken leader was refused by the leadership term the backend records")
	case r.lost != nil && r.lost(string(log)):
		observed(t, "the old leader's paused session had lost its connection when it woke; the fence was not reached")
	case r.reach:
		t.Fatalf("the old leader was not refused by the term the backend records:\n%s", tail(string(log), 3000))
	default:
		observed(t, "the woken leader found nothing left to change (what it would have changed was gone)")
	}

	discard(t, ns, name, "r2")
	cs = waitPhase(t, ns, name, v1.PhaseIdle, gen+1)
	if bad := r.refused(t, sourceData(t, cs)); len(bad) > 0 {
		t.Fatalf("r2 completed by the new leader, refused: %v", bad)
	}
	if p != nil {
		mk.done(t, "the woken leader changes nothing and exits; the new leader completes both rotations; no login refused")
		p.assertNoGap(t)
	}
	t.Logf("row %s took %s", r.failpoint, time.Since(started).Round(time.Second))
}

// TestPausedLeaderPostgres: the paused-leader scenario at PostgreSQL's
// mutating steps, on a real primary and replica. Apply: paused right
// after it stored r1's new password, the old leader wakes to create or
// alter r1's login and drop every other generation — r2's among them,
// which consumers are moving to; the term recorded on the roles refuses
// it. Retire: paused as it starts r1's discard, it wakes to drop r1's old
// login, which the new leader dropped already. Abort: r1 is aborted; paused
// in the reset, right after it repaired the current login, the old leader
// wakes to drop every other generation — r2's among them, which the new
// leader made after completing the reset; the term refuses it. The
// control (-unfenced) runs that row with no fence: r2's login is dropped.
func TestPausedLeaderPostgres(t *testing.T) {
	p := pgMatrixCluster(t)
	if err := p.Exec(p.Primary, "CREATE ROLE ha_owner NOLOGIN", "GRANT CREATE ON SCHEMA public TO ha_owner"); err != nil {
		t.Fatal(err)
	}
	set := func(t *testing.T, ns, name string) *v1.CredentialSet {
		createSecret(t, ns, name+"-admin", map[string]string{"username": p.AdminUser, "password": p.AdminPassword})
		createSecret(t, ns, name+"-ca", map[string]string{"ca.crt": string(p.CAPEM)})
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1.CredentialSetSpec{
				Postgres: &v1.PostgresSpec{
					Hosts:          []string{p.Primary.Addr(), p.Replica.Addr()},
					Admin:          v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: name + "-admin"}},
					TLSCASecretRef: &v1.SecretKeyRef{Name: name + "-ca", Key: "ca.crt"},
					Login:          v1.PostgresLogin{Base: name, Group: "ha_owner"},
				},
				Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-db"}},
				Rotation:     v1.RotationSpec{DiscardPolicy: v1.DiscardManual},
			},
		}
	}
	refused := func(t *testing.T, data map[string][]byte) []string {
		var bad []string
		for _, sfx := range []string{"", engine.PendingSuffix} {
			user, pw := string(data["username"+sfx]), string(data["password"+sfx])
			if user == "" {
				continue
			}
			for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
				if err := p.CanLogin(i, user, pw); err != nil {
					bad = append(bad, user+" on "+i.Name+": "+err.Error())
				}
			}
		}
		return bad
	}
	probe := func(t *testing.T, ns, name string) *prober { return pgProber(t, p, ns, name+"-db") }
	for _, r := range []pausedRow{
		{name: "hapgapply", failpoint: "rotate/pending-stored", reach: true},
		{name: "hapgretire", failpoint: "discard/discard-started", inDiscard: true},
		{name: "hapgabort", failpoint: "reset/postgres-login-ensured", inAbort: true, reach: true},
		{name: "hapgctl", failpoint: "reset/postgres-login-ensured", inAbort: true, unfenced: true},
	} {
		r.set, r.refused, r.probe = set, refused, probe
		r.settle = func(t *testing.T, name string) { pgSessionsGone(t, p, name) }
		t.Run(r.label(), func(t *testing.T) { runPausedRow(t, r) })
	}
}

// pgSessionsGone waits until no session is logged in as one of base's
// login roles on either server.
func pgSessionsGone(t *testing.T, p *testenv.Postgres, base string) {
	t.Helper()
	waitFor(t, time.Minute, "no session of "+base+"'s logins", func() (bool, string) {
		for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
			c, err := p.Admin(ctxT(t), i)
			if err != nil {
				return false, err.Error()
			}
			var n int
			err = c.QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE usename LIKE $1", base+`\_g%`).Scan(&n)
			_ = c.Close(ctxT(t))
			if err != nil || n > 0 {
				return false, fmt.Sprintf("%d session(s) on %s (%v)", n, i.Name, err)
			}
		}
		return true, ""
	})
}

// rabbitProber logs in, again and again, as the user the distribution
// Secret holds now.
func rabbitProber(t testing.TB, m *testenv.RabbitMQ, ns, secret string) *prober {
	pr := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		for {
			select {
			case <-pr.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			s := &corev1.Secret{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: secret}, s); err != nil {
				continue
			}
			user := string(s.Data["username"])
			pr.record(user, "broker", m.CanAuthenticate(user, string(s.Data["password"])), nil)
		}
	}()
	t.Cleanup(pr.halt)
	return pr
}

// TestPausedLeaderRabbitMQ: the paused-leader scenario at RabbitMQ's
// mutating steps, on a real broker. Apply: paused right after it put r1's
// new user, the old leader wakes to put it again and delete every other
// generation — r2's among them; the term the broker keeps refuses it.
// Retire: paused right after it deleted r1's old user, it wakes to go on
// with r1's discard, which the new leader completed. Abort: r1 is aborted;
// paused in the reset, right after it put the current user back, the old
// leader wakes to delete every other generation — r2's user among them;
// the term refuses it. The control (-unfenced) runs that row with no
// fence: r2's user is deleted.
func TestPausedLeaderRabbitMQ(t *testing.T) {
	m := testenv.RabbitMQForTest(t)
	set := func(t *testing.T, ns, name string) *v1.CredentialSet {
		cs := rabbitSet(t, ns, name, m)
		cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardManual}
		return cs
	}
	refused := func(t *testing.T, data map[string][]byte) []string {
		var bad []string
		for _, sfx := range []string{"", engine.PendingSuffix} {
			user := string(data["username"+sfx])
			if user == "" {
				continue
			}
			if err := m.CanAuthenticate(user, string(data["password"+sfx])); err != nil {
				bad = append(bad, user+": "+err.Error())
			}
		}
		return bad
	}
	probe := func(t *testing.T, ns, name string) *prober { return rabbitProber(t, m, ns, name+"-transport") }
	for _, r := range []pausedRow{
		{name: "harbapply", failpoint: "rotate/rabbitmq-user-put", reach: true},
		{name: "harbretire", failpoint: "discard/rabbitmq-user-deleted", inDiscard: true},
		{name: "harbabort", failpoint: "reset/rabbitmq-user-put", inAbort: true, reach: true},
		{name: "harbctl", failpoint: "reset/rabbitmq-user-put", inAbort: true, unfenced: true},
	} {
		r.set, r.refused, r.probe = set, refused, probe
		t.Run(r.label(), func(t *testing.T) { runPausedRow(t, r) })
	}
}

// TestPausedLeaderMySQLApply: the paused-leader scenario at MySQL's apply,
// on a real primary and two replicas: the old leader stops with a session
// open on an instance, about to apply r1 (ALTER USER … RETAIN CURRENT
// PASSWORD); when it wakes, the new leader has completed r1 and applied
// r2, so a RETAIN now would make r2's new password the retained one and
// r1's the current: the term MySQL records on the users refuses it.
func TestPausedLeaderMySQLApply(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	prepareAdmin(t, c.Instances(), "ops-admin", "ops-admin-password-for-tests")
	const name = "haapply"
	keys := map[string]string{strings.ToUpper(name) + "_PASSWORD": name}
	runPausedRow(t, pausedRow{
		name: name, failpoint: "rotate/session-opened", reach: true, lost: sessionLost,
		set: func(t *testing.T, ns, name string) *v1.CredentialSet { return preparedAdminSet(t, ns, name, c) },
		probe: func(t *testing.T, ns, name string) *prober {
			return startProber(t, c.Instances(), ns, name+"-db", keys)
		},
		refused: func(t *testing.T, data map[string][]byte) []string {
			var bad []string
			for _, sfx := range []string{"", engine.PendingSuffix} {
				for user, pw := range userPasswords(data, keys, sfx) {
					for _, i := range c.Instances() {
						if err := i.CanLogin(user, pw); err != nil {
							bad = append(bad, user+sfx+" on "+i.Name+": "+err.Error())
						}
					}
				}
			}
			return bad
		},
	})
}
