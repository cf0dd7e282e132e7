package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// stsManager creates StatefulSet "db" (3 replicas) and starts a manager
// that maps its pods' cluster DNS names onto the test cluster's instances
// (db-<n> is c.Instances()[n]).
func stsManager(t *testing.T, ns string, c *testenv.MySQLCluster) {
	t.Helper()
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(3)), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysqld", Image: "mysql:9.7"}}},
			},
		},
	}
	if err := k8s.Create(ctxT(t), sts); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	for n, i := range c.Instances() {
		addrs[fmt.Sprintf("db-%d.db.%s.svc:3306", n, ns)] = i.Addr()
	}
	startManager(t, cp.Config, func(r *controller.Reconciler) {
		r.AddressMap = func(a string) string { return addrs[a] }
	})
}

// stsSet is a moco set whose instances come from StatefulSet "db" (3
// replicas), with cluster DNS names mapped onto the test cluster.
func stsSet(t *testing.T, ns, name string, c *testenv.MySQLCluster) *v1.CredentialSet {
	t.Helper()
	stsManager(t, ns, c)
	cs := mocoSet(t, ns, name, c)
	deployConsumers(t, cs, mocoKeys, c.Instances)
	cs.Spec.MySQL.Instances = v1.MySQLInstances{StatefulSet: &v1.StatefulSetInstances{Name: "db"}}
	// The pods' DNS names are mapped onto local ports; the instances share
	// one certificate, as a cluster with a single server name does.
	cs.Spec.MySQL.TLSServerName = testenv.MySQLTLSName
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, name, v1.PhaseIdle, 1)
	return cs
}

func scale(t *testing.T, ns, name string, n int32) {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sts); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(sts.DeepCopy())
	sts.Spec.Replicas = &n
	if err := k8s.Patch(context.Background(), sts, patch); err != nil {
		t.Fatal(err)
	}
}

// waitDegraded waits for the Degraded condition with reason and returns
// its message.
func waitDegraded(t *testing.T, ns, name string, why reason.Reason) string {
	t.Helper()
	msg := ""
	eventually(t, time.Minute, "Degraded="+string(why), func() (bool, string) {
		cs := getSet(t, ns, name)
		c := condition(cs, reason.CondDegraded)
		if c != nil && c.Status == metav1.ConditionTrue && c.Reason == string(why) {
			msg = c.Message
			return true, ""
		}
		return false, stateOf(cs)
	})
	return msg
}

func mustContain(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Fatalf("%s %q does not mention %q", what, s, p)
		}
	}
	observed(t, "%s names %q", what, parts)
}

// TestRefusalsAndHealthGate: every documented MySQL refusal that a live cluster
// can reach, each with its Warning Event and Degraded condition, and the
// health gate holding and resuming a phase.
func TestRefusalsAndHealthGate(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	stsSet(t, ns, "ref", c)
	gen1 := userPasswords(sourceData(t, getSet(t, ns, "ref")), mocoKeys, "")
	p := loginProber(t, c.Instances(), ns, "ref-creds")

	t.Run("discard with no active rotation is skipped and consumed", func(t *testing.T) {
		mk := matrixMark(t, p, "discard requested with no active rotation")
		discard(t, ns, "ref", "nope")
		note := waitEvent(t, ns, "ref", string(reason.DiscardSkipped))
		mustContain(t, "DiscardSkipped event", note, "kubectl rekey rotate")
		eventually(t, 30*time.Second, "discard annotation consumed", func() (bool, string) {
			_, ok := getSet(t, ns, "ref").Annotations[engine.DiscardAnnotation]
			return !ok, "still there"
		})
		mk.held(t, "skipped (DiscardSkipped): Warning event with the next step, request removed")
	})

	t.Run("a dual password nobody accounts for refuses the rotation", func(t *testing.T) {
		r1 := c.Replicas[0]
		onEachInstance(t, []*testenv.MySQLInstance{r1},
			"ALTER USER 'moco-readonly'@'%' IDENTIFIED BY 'someone-elses' RETAIN CURRENT PASSWORD")
		mk := matrixMark(t, p, "dual password created by hand before rotation, then reset by hand")
		rotate(t, ns, "ref", "r-dual")
		note := waitEvent(t, ns, "ref", string(reason.DualPasswordExists))
		mustContain(t, "DualPasswordExists event", note, "moco-readonly@%", "db-1", "DISCARD OLD PASSWORD")
		msg := waitDegraded(t, ns, "ref", reason.DualPasswordExists)
		mustContain(t, "Degraded condition", msg, "db-1")
		if cs := getSet(t, ns, "ref"); cs.Status.Phase != v1.PhaseIdle {
			t.Fatalf("refused rotation left phase %s", cs.Status.Phase)
		}
		// The documented reset (IDENTIFIED BY, then DISCARD OLD PASSWORD), then retry.
		onEachInstance(t, []*testenv.MySQLInstance{r1},
			fmt.Sprintf("ALTER USER 'moco-readonly'@'%%' IDENTIFIED BY '%s'", gen1["moco-readonly"]),
			"ALTER USER 'moco-readonly'@'%' DISCARD OLD PASSWORD")
		// The refused request stays: once the reset is done, the rotation
		// starts by itself (an edit of the set wakes rekey before its retry).
		mk.resume()
		annotate(t, ns, "ref", "test.rekey.io/touch", "after-reset")
		cs := waitPhase(t, ns, "ref", v1.PhaseDistributed, 1)
		mk.reached()
		if cs.Status.RotationID != "r-dual" {
			t.Fatalf("rotation %q started, want the refused request r-dual", cs.Status.RotationID)
		}
		discard(t, ns, "ref", "r-dual")
		waitPhase(t, ns, "ref", v1.PhaseIdle, 2)
		mk.done(t, "refused (DualPasswordExists, names the instance and the reset); after the reset the kept request ran, completed")
	})

	t.Run("replicas 0 refuses rotate and discard; scaling up resumes", func(t *testing.T) {
		scale(t, ns, "db", 0)
		mk := matrixMark(t, p, "replicas scaled to 0 before rotation, then back to 3")
		rotate(t, ns, "ref", "r-zero")
		note := waitEvent(t, ns, "ref", string(reason.RotateRefused))
		mustContain(t, "RotateRefused event", note, "replicas: 0", "scale")
		if cs := getSet(t, ns, "ref"); cs.Status.Phase != v1.PhaseIdle {
			t.Fatalf("rotation started with no instances: %s", stateOf(cs))
		}
		scale(t, ns, "db", 3)
		mk.resume()
		waitPhase(t, ns, "ref", v1.PhaseDistributed, 2)
		mk.done(t, "refused (RotateRefused); on scale-up the rotation started by itself, Distributed")
		scale(t, ns, "db", 0)
		mk = matrixMark(t, p, "replicas scaled to 0 mid-rotation (Distributed), then back to 3")
		discard(t, ns, "ref", "r-zero")
		note = waitEvent(t, ns, "ref", string(reason.DiscardRefused))
		mustContain(t, "DiscardRefused event", note, "replicas: 0")
		if cs := getSet(t, ns, "ref"); cs.Status.Phase != v1.PhaseDistributed || cs.Status.DiscardApplied {
			t.Fatalf("discard went ahead with no instances: %s", stateOf(cs))
		}
		scale(t, ns, "db", 3)
		mk.resume()
		waitPhase(t, ns, "ref", v1.PhaseIdle, 3)
		mk.done(t, "discard refused (DiscardRefused), nothing discarded; on scale-up it completed by itself")
	})

	t.Run("an unreachable instance holds the phase; it resumes when back", func(t *testing.T) {
		old := userPasswords(sourceData(t, getSet(t, ns, "ref")), mocoKeys, "")
		down := c.Replicas[1]
		down.Stop()
		mk := matrixMark(t, p, "instance stopped, rotation requested, instance started again")
		rotate(t, ns, "ref", "r-down")
		note := waitEvent(t, ns, "ref", string(reason.InstanceUnreachable))
		mustContain(t, "InstanceUnreachable event", note, "db-2")
		mustContain(t, "Degraded condition", waitDegraded(t, ns, "ref", reason.InstanceUnreachable), "db-2")
		if err := down.Start(); err != nil {
			t.Fatal(err)
		}
		mk.resume()
		cs := waitPhase(t, ns, "ref", v1.PhaseDistributed, 3)
		mk.reached()
		pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
		loginMatrix(t, "Distributed after the instance came back", c.Instances(), pend, nil)
		loginMatrix(t, "Distributed after the instance came back", c.Instances(), old, nil)
		mk.done(t, "held (InstanceUnreachable, names the instance); resumed by itself to Distributed, old and new log in")

		down.Stop()
		mk = matrixMark(t, p, "instance stopped while Distributed, discard requested, instance started again")
		discard(t, ns, "ref", "r-down")
		eventually(t, time.Minute, "discard held by the health gate", func() (bool, string) {
			cs := getSet(t, ns, "ref")
			c := condition(cs, reason.CondDegraded)
			return c != nil && c.Status == "True" && strings.Contains(c.Message, "db-2"), stateOf(cs)
		})
		if err := down.Start(); err != nil {
			t.Fatal(err)
		}
		mk.resume()
		waitPhase(t, ns, "ref", v1.PhaseIdle, 4)
		mk.reached()
		loginMatrix(t, "Idle after the instance came back", c.Instances(), pend, old)
		// The phase moves to Idle in one status write and the conditions
		// follow in the same reconcile's observation, a moment later.
		eventually(t, 30*time.Second, "Degraded cleared after recovery", func() (bool, string) {
			d := condition(getSet(t, ns, "ref"), reason.CondDegraded)
			return d != nil && d.Status == "False", fmt.Sprintf("%+v", d)
		})
		mk.done(t, "held by the health gate; completed by itself, only the new passwords log in, Degraded cleared")
	})
}

// TestPendingTampering: the source Secret losing or changing its pending
// data stops the cycle with the documented event instead of guessing.
func TestPendingTampering(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	set := mocoSet(t, ns, "miss", c)
	deployConsumers(t, set, mocoKeys, c.Instances)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "miss", v1.PhaseIdle, 1)
	p := loginProber(t, c.Instances(), ns, "miss-creds")

	t.Run("pending keys deleted while Distributed: MissingRotationPending", func(t *testing.T) {
		rotate(t, ns, "miss", "r-miss")
		cs := waitPhase(t, ns, "miss", v1.PhaseDistributed, 1)
		mk := matrixMark(t, p, "source Secret tampering: a pending key deleted while Distributed")
		editSource(t, cs, func(d map[string][]byte) { delete(d, "AGENT_PASSWORD"+engine.PendingSuffix) })
		discard(t, ns, "miss", "r-miss")
		note := waitEvent(t, ns, "miss", string(reason.MissingRotationPending))
		mustContain(t, "MissingRotationPending event", note, "kubectl rekey recover")
		waitDegraded(t, ns, "miss", reason.MissingRotationPending)
		if cs := getSet(t, ns, "miss"); cs.Status.Phase != v1.PhaseDistributed || cs.Status.DiscardApplied {
			t.Fatalf("discard went ahead without pending secrets: %s", stateOf(cs))
		}
		// Nothing was discarded: the old passwords still log in.
		loginMatrix(t, "after the refused discard", c.Instances(), userPasswords(sourceData(t, cs), mocoKeys, ""), nil)
		mk.held(t, "discard refused (MissingRotationPending, next step kubectl rekey recover); nothing discarded, old passwords log in")
	})

	t.Run("ROTATION_ID changed while Distributed: StaleRotationPending", func(t *testing.T) {
		cs := getSet(t, ns, "miss")
		mk := matrixMark(t, p, "source Secret tampering: ROTATION_ID changed while Distributed")
		editSource(t, cs, func(d map[string][]byte) { d[engine.RotationIDKey] = []byte("someone-else") })
		// The discard request is still there (refusals keep it); any edit
		// of the set wakes rekey up before its one-minute retry.
		annotate(t, ns, "miss", "test.rekey.io/touch", time.Now().String())
		note := waitEvent(t, ns, "miss", string(reason.StaleRotationPending))
		mustContain(t, "StaleRotationPending event", note, "kubectl rekey recover")
		mk.held(t, "refused (StaleRotationPending, next step kubectl rekey recover)")
	})

	t.Run("then kubectl rekey recover rolls the rotation back, and a new one completes", func(t *testing.T) {
		cs := getSet(t, ns, "miss")
		old := userPasswords(sourceData(t, cs), mocoKeys, "")
		mk := matrixMark(t, p, "source Secret tampering (a pending key deleted, ROTATION_ID changed), then kubectl rekey recover")
		annotate(t, ns, "miss", engine.RecoverAnnotation, "rec-miss")
		waitReset(t, ns, "miss", 1)
		mk.reached()
		loginMatrix(t, "after recovery", c.Instances(), old, nil)
		assertNoDualPassword(t, c)
		// The rotation that could not go on ended as failed.
		assertRotationResults(t, ns, "miss", 0, 0, 1)
		if _, ok := sourceData(t, getSet(t, ns, "miss"))[engine.RotationIDKey]; ok {
			t.Fatal("the source Secret still holds ROTATION_ID after recovery")
		}
		rotate(t, ns, "miss", "r-after")
		cs = waitPhase(t, ns, "miss", v1.PhaseDistributed, 1)
		pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
		discard(t, ns, "miss", "r-after")
		waitPhase(t, ns, "miss", v1.PhaseIdle, 2)
		loginMatrix(t, "a rotation after recovery", c.Instances(), pend, old)
		mk.done(t, "rolled back to the current passwords, no dual password left, pending data dropped; a new rotation then completed")
	})
}

// TestPendingAltered: a pending password altered in the source Secret is
// caught before anything is discarded (the consumers holding the applied
// one are not stranded), and recover rolls the rotation back.
func TestPendingAltered(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	set := mocoSet(t, ns, "alt", c)
	deployConsumers(t, set, mocoKeys, c.Instances)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "alt", v1.PhaseIdle, 1)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")
	rotate(t, ns, "alt", "alt-1")
	cs = waitPhase(t, ns, "alt", v1.PhaseDistributed, 1)
	applied := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	mk := matrixMark(t, loginProber(t, c.Instances(), ns, "alt-creds"), "source Secret tampering: a pending password altered while Distributed, then kubectl rekey recover")
	editSource(t, cs, func(d map[string][]byte) { d["AGENT_PASSWORD"+engine.PendingSuffix] = []byte("altered-by-hand") })
	discard(t, ns, "alt", "alt-1")
	note := waitEvent(t, ns, "alt", string(reason.PendingRejected))
	mustContain(t, "PendingRejected event", note, "moco-agent@%", "kubectl rekey recover")
	if cs := getSet(t, ns, "alt"); cs.Status.DiscardApplied {
		t.Fatalf("discard applied with an altered pending password: %s", stateOf(cs))
	}
	loginMatrix(t, "after the refused discard", c.Instances(), old, nil)
	loginMatrix(t, "after the refused discard", c.Instances(), applied, nil)

	mk.resume()
	annotate(t, ns, "alt", engine.RecoverAnnotation, "rec-alt")
	cs = waitReset(t, ns, "alt", 1)
	mk.reached()
	loginMatrix(t, "after recovery", c.Instances(), old, applied)
	assertNoDualPassword(t, c)
	mk.done(t, "discard refused (PendingRejected), nothing discarded; recover rolled back to the old passwords only")
}

func editSource(t *testing.T, cs *v1.CredentialSet, edit func(map[string][]byte)) {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: OperatorNamespace, Name: naming.SourceSecretName(cs)}, s); err != nil {
		t.Fatal(err)
	}
	edit(s.Data)
	if err := k8s.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}
