package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/testenv"
)

// crashBases are the logins of TestPostgresCrashSafety's set: two, so
// that a kill between one login's change and the other's is among the
// kills.
var crashBases = []string{"crash", "crashr"}

// TestPostgresCrashSafety kills the real manager at every persisted step of
// a two-login PostgreSQL set's provisioning, rotation and discard (and
// right after a role change on the server, with the other login's still
// to come), starts a fresh one each time, and shows the cycle completes:
// at every kill, every login role of the set accepts a password the source
// Secret holds and the distributed logins log in on the primary and the
// replica. Each kill is a row of the fault matrix, with the logins of the
// set's consumer pods (a Deployment in spec.consumers whose pods read the
// Secret when they start and log in with both logins to both instances
// until rekey's rollout replaces them), of a prober (what the distributed
// Secret holds now) and of pgbench consumers the test restarts itself.
func TestPostgresCrashSafety(t *testing.T) {
	p := pgMatrixCluster(t)
	if err := p.Exec(p.Primary, "CREATE ROLE app_owner NOLOGIN", "GRANT CREATE ON SCHEMA public TO app_owner"); err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	createSecret(t, ns, "pg-admin", map[string]string{"username": p.AdminUser, "password": p.AdminPassword})
	createSecret(t, ns, "pg-ca", map[string]string{"ca.crt": string(p.CAPEM)})
	var logins []v1.PostgresLogin
	for _, b := range crashBases {
		logins = append(logins, v1.PostgresLogin{Base: b, Group: "app_owner"})
	}
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crash"},
		Spec: v1.CredentialSetSpec{
			Postgres: &v1.PostgresSpec{
				Hosts:          []string{p.Primary.Addr(), p.Replica.Addr()},
				Admin:          v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "pg-ca", Key: "ca.crt"},
				Logins:         logins,
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "crash-db"}},
			Rotation:     v1.RotationSpec{DiscardPolicy: v1.DiscardManual},
		},
	}
	deployConsumersWay(t, cs, pgWay(p, crashBases...))
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	probe := pgProber(t, p, ns, "crash-db")
	var consumers, everConsumers []*pgConsumer
	// Consumers read the Secret when they start: a rollout restarts them.
	restartConsumers := func() {
		for _, c := range consumers {
			c.stop(t)
		}
		d := secretData(t, ns, "crash-db")
		consumers = nil
		for _, b := range crashBases {
			consumers = append(consumers, startPgConsumer(t, p, loginData(t, d, b, string(d[b+".username"]))))
		}
		everConsumers = append(everConsumers, consumers...)
	}
	steps := []struct {
		failpoint, when string
		before          func() // what the person does once this manager runs
	}{
		{"provision/source-stored", "provisioning", nil},
		{"postgres/login-ensured", "provisioning, the first login made", nil},
		{"rotate/pending-stored", "rotation", func() {
			waitPhase(t, ns, "crash", v1.PhaseIdle, 1)
			d := secretData(t, ns, "crash-db")
			if out, err := p.Pgbench(p.Primary, "crash_g1", string(d["crash.password"]), "-i", "-s", "1", "-q"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			restartConsumers()
			rotate(t, ns, "crash", "r1")
		}},
		{"postgres/login-ensured", "rotation, the first new login made", nil},
		{"rotate/rotate-applied", "rotation", nil},
		{"rotate/pending-distributed", "rotation", nil},
		{"rotate/phase-distributed", "rotation", nil},
		{"discard/discard-started", "discard", func() {
			waitPhase(t, ns, "crash", v1.PhaseDistributed, 1)
			restartConsumers()
			discard(t, ns, "crash", "r1")
		}},
		{"postgres/login-dropped", "discard, the first old login dropped", nil},
		{"discard/discard-applied", "discard", nil},
		{"discard/phase-idle", "discard", nil},
	}
	var open *scenarioMark
	var openConsumed [2]int
	closeRow := func() {
		if open == nil {
			return
		}
		open.reached()
		n, refused := pgConsumerTotals(everConsumers)
		open.saw("pgbench consumers (reading at start): %d connections, %d refused", n-openConsumed[0], refused-openConsumed[1])
		if refused > openConsumed[1] {
			t.Errorf("locked out: pgbench consumers had %d connections refused", refused-openConsumed[1])
		}
		open.done(t, "a fresh manager went on from the kill; at the kill every role of the set accepted a password the source Secret holds and the distributed logins logged in on the primary and the replica")
	}
	for _, step := range steps {
		m := startManagerProcess(t, step.failpoint)
		if open != nil {
			open.resume()
		}
		if step.before != nil {
			step.before()
		}
		m.waitKilled(t, step.failpoint)
		closeRow()
		open = matrixMark(t, probe, fmt.Sprintf("PostgreSQL, two logins: manager killed at %s (%s)", step.failpoint, step.when))
		n, refused := pgConsumerTotals(everConsumers)
		openConsumed = [2]int{n, refused}
		assertPgRecoverable(t, p, getSet(t, ns, "crash"), "killed at "+step.failpoint)
	}
	open.resume()
	startManagerProcess(t, "")
	waitPhase(t, ns, "crash", v1.PhaseIdle, 2)
	closeRow()
	d := secretData(t, ns, "crash-db")
	for _, b := range crashBases {
		want := b + "_g2"
		if got := string(d[b+".username"]); got != want {
			t.Fatalf("after the cycle the Secret names %q, want %s", got, want)
		}
		if roles := pgRoles(t, p, b+"_g"); strings.Join(roles, ",") != want {
			t.Fatalf("after the cycle the roles of %s are %v, want only %s", b, roles, want)
		}
		for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
			if err := p.CanLogin(i, want, string(d[b+".password"])); err != nil {
				t.Fatalf("%s on the %s: %v", want, i.Name, err)
			}
		}
	}
	for _, c := range consumers {
		c.waitLogins(t, c.count()+10)
		c.stop(t)
	}
	if probe.failures.Load() > 0 || probe.attempts.Load() == 0 {
		t.Fatalf("prober: %d of %d logins refused", probe.failures.Load(), probe.attempts.Load())
	}
	t.Logf("prober: %d logins with the distributed Secret, none refused", probe.attempts.Load())
}

// pgConsumerTotals sums the consumers' connections and refusals.
func pgConsumerTotals(cs []*pgConsumer) (n, refused int) {
	for _, c := range cs {
		c.mu.Lock()
		n += c.logins
		refused += len(c.failed)
		c.mu.Unlock()
	}
	return n, refused
}

// pgProber logs in, again and again, with every login the distributed
// Secret holds now, on the primary and the replica: only a refused
// password or role (SQLSTATE 28P01, 28000) counts as failed.
func pgProber(t testing.TB, p *testenv.Postgres, ns, secret string) *prober {
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
			for k, user := range s.Data {
				prefix, ok := strings.CutSuffix(k, "username")
				if !ok {
					continue
				}
				for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
					pr.record(string(user), i.Name, p.CanLogin(i, string(user), string(s.Data[prefix+"password"])), nil)
				}
			}
		}
	}()
	t.Cleanup(pr.halt)
	return pr
}

// assertPgRecoverable: every login role of the set accepts a password the
// source Secret holds (stored before applied), and every distributed
// login, if any yet, logs in on every instance (no consumer locked out).
func assertPgRecoverable(t testing.TB, p *testenv.Postgres, cs *v1.CredentialSet, when string) {
	t.Helper()
	// The manager may have been killed between a change on the primary and
	// its wait for the replay: the replica gets it a moment later.
	if err := p.WaitReplayed(); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	src := map[string][]byte{}
	s := &corev1.Secret{}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: OperatorNamespace, Name: naming.SourceSecretName(cs)}, s); err == nil {
		src = s.Data
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	dist := &corev1.Secret{}
	err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: cs.Namespace, Name: cs.Spec.Distribution[0].Name}, dist)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	for _, l := range cs.Spec.Postgres.RotatingLogins() {
		prefix := ""
		if len(cs.Spec.Postgres.Logins) > 0 {
			prefix = l.Base + "."
		}
		held := map[string]string{}
		for _, suffix := range []string{"", engine.PendingSuffix} {
			if u := string(src[prefix+"username"+suffix]); u != "" {
				held[u] = string(src[prefix+"password"+suffix])
			}
		}
		for _, role := range pgRoles(t, p, l.Base+"_g") {
			pw, ok := held[role]
			if !ok {
				t.Fatalf("%s: role %s exists but the source Secret holds no password for it", when, role)
			}
			for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
				if err := p.CanLogin(i, role, pw); err != nil {
					t.Fatalf("%s: role %s does not accept the source Secret's password on the %s: %v", when, role, i.Name, err)
				}
			}
		}
		if dist.Data == nil {
			continue
		}
		user := string(dist.Data[prefix+"username"])
		for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
			if err := p.CanLogin(i, user, string(dist.Data[prefix+"password"])); err != nil {
				t.Fatalf("%s: the distributed login %s is refused on the %s: %v", when, user, i.Name, err)
			}
		}
	}
	observed(t, "%s: every role of the set accepts a password the source Secret holds; the distributed logins log in on the primary and the replica", when)
}
