package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestExplorerPaths replays, on a real mysqld cluster and a real control
// plane with consumer pods that read their Secret at start, paths the
// state-space explorer (internal/explorer) found:
//   - a DBA's hand change on one replica while a rotation is Distributed
//     must hold the discard before it begins, so that recover (which the
//     refusal names) can still roll back;
//   - recover on a set whose status and source Secret were restored from a
//     backup while its consumers run a later rotation's passwords must
//     restart them before the reset, or the reset refuses them;
//   - a rollback whose current passwords every instance refuses (a user
//     set by hand) must not restart consumers while their Secret still
//     holds the rotation's passwords, or the reset refuses them.
func TestExplorerPaths(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	set := mocoSet(t, ns, "xp", c)
	// The pods use every user but the one the DBA changes by hand: a
	// refusal of theirs is rekey's doing, never the DBA's.
	keys := maps.Clone(mocoKeys)
	delete(keys, "EXPORTER_PASSWORD")
	pc := deployConsumers(t, set, keys, c.Instances)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "xp", v1.PhaseIdle, 1)
	cur := userPasswords(sourceData(t, cs), mocoKeys, "")
	// The backup an operator takes of an idle set: its status and its
	// source Secret.
	backupStatus := *cs.Status.DeepCopy()
	backupSource := maps.Clone(sourceData(t, cs))

	t.Run("a hand change on one replica holds the discard, and recover rolls back", func(t *testing.T) {
		rotate(t, ns, "xp", "xp-1")
		waitRolledOut(t, ns, "xp")
		pending := userPasswords(sourceData(t, getSet(t, ns, "xp")), mocoKeys, engine.PendingSuffix)
		onEachInstance(t, c.Replicas[:1], "ALTER USER 'moco-exporter'@'%' IDENTIFIED BY 'changed-by-hand'")
		discard(t, ns, "xp", "xp-1")
		mustContain(t, "PendingRejected event", waitEvent(t, ns, "xp", string(reason.PendingRejected)), "moco-exporter")
		if cs := getSet(t, ns, "xp"); cs.Status.DiscardStarted || cs.Status.DiscardApplied {
			t.Fatalf("the discard began although %s refuses the new password: %s", c.Replicas[0].Name, stateOf(cs))
		}
		annotate(t, ns, "xp", engine.RecoverAnnotation, "xp-rec-1")
		waitRecovered(t, ns, "xp", "xp-rec-1")
		loginMatrix(t, "after recovery", c.Instances(), cur, pending)
		if c.Replicas[0].CanLogin("moco-exporter", "changed-by-hand") == nil {
			t.Fatal("the password set by hand still logs in after recovery")
		}
		assertNoDualPassword(t, c)
		assertNoRefusals(t, pc)
	})

	t.Run("recover after a restore from backup restarts the consumers before the reset", func(t *testing.T) {
		rotate(t, ns, "xp", "xp-2")
		waitRolledOut(t, ns, "xp")
		restoreSet(t, ns, "xp", backupStatus, backupSource)
		rotate(t, ns, "xp", "xp-3")
		waitEvent(t, ns, "xp", string(reason.DualPasswordExists))
		annotate(t, ns, "xp", engine.RecoverAnnotation, "xp-rec-2")
		waitRecovered(t, ns, "xp", "xp-rec-2")
		loginMatrix(t, "after recovery", c.Instances(), cur, nil)
		assertNoRefusals(t, pc)
	})

	t.Run("a rollback whose current passwords every instance refuses holds the consumers' restart", func(t *testing.T) {
		// The rotation the recovery above let start (xp-3, requested while
		// refused) is the one rolled back here.
		waitRolledOut(t, ns, "xp")
		cs := getSet(t, ns, "xp")
		id, cur := cs.Status.RotationID, userPasswords(sourceData(t, cs), mocoKeys, "")
		before := restartOf(t, ns, "xp-app")
		// Every instance now refuses the current password of one user, so
		// the distribution Secret cannot go back to the current secrets.
		onEachInstance(t, c.Instances(), "ALTER USER 'moco-exporter'@'%' IDENTIFIED BY 'changed-by-hand'", "ALTER USER 'moco-exporter'@'%' DISCARD OLD PASSWORD")
		annotate(t, ns, "xp", engine.AbortAnnotation, id)
		waitFor(t, 3*time.Minute, "the rollback recorded and its distribution refused", func() (bool, string) {
			cs := getSet(t, ns, "xp")
			cond := meta.FindStatusCondition(cs.Status.Conditions, "Degraded")
			return cs.Status.ResetPending && cond != nil && cond.Reason == string(reason.PendingRejected), stateOf(cs)
		})
		if got := restartOf(t, ns, "xp-app"); got != before {
			t.Fatalf("the consumers were restarted (%q → %q) while their Secret still held the rotation's passwords", before, got)
		}
		observed(t, "restart held while the distribution is refused")
		onEachInstance(t, c.Instances(), "ALTER USER 'moco-exporter'@'%' IDENTIFIED BY "+sqlString(cur["moco-exporter"]), "ALTER USER 'moco-exporter'@'%' DISCARD OLD PASSWORD")
		waitFor(t, 3*time.Minute, "the rollback completed", func() (bool, string) {
			cs := getSet(t, ns, "xp")
			done := meta.IsStatusConditionTrue(cs.Status.Conditions, "RolloutComplete")
			return cs.Status.Phase == v1.PhaseIdle && !cs.Status.ResetPending && done && restartOf(t, ns, "xp-app") != before, stateOf(cs)
		})
		loginMatrix(t, "after the rollback", c.Instances(), cur, nil)
		assertNoRefusals(t, pc)
	})
}

// restartOf is the restart annotation rekey puts on Deployment name's pod
// template ("" when none).
func restartOf(t *testing.T, ns, name string) string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	for k, v := range d.Spec.Template.Annotations {
		if strings.HasPrefix(k, "rekey.io/") {
			return k + "=" + v
		}
	}
	return ""
}

// sqlString quotes s as a MySQL string literal.
func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
}

// waitRecovered waits until recover request id was served and the reset
// it asked for is done (a restored status is Idle and reset already).
func waitRecovered(t *testing.T, ns, name, id string) {
	t.Helper()
	waitFor(t, 3*time.Minute, "recovery "+id+" done", func() (bool, string) {
		cs := getSet(t, ns, name)
		return cs.Status.LastRecoverID == id && !cs.Status.ResetPending, stateOf(cs)
	})
	observed(t, "recovery %s done", id)
}

// waitRolledOut waits until a rotation is Distributed and every consumer
// restarted onto its secrets.
func waitRolledOut(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, 3*time.Minute, name+" Distributed and rolled out", func() (bool, string) {
		cs := getSet(t, ns, name)
		return cs.Status.Phase == v1.PhaseDistributed && cs.Status.RolledOutAt != nil, stateOf(cs)
	})
}

// restoreSet puts back a backup of the set's status and source Secret, as
// an operator restoring from backup does.
func restoreSet(t *testing.T, ns, name string, st v1.CredentialSetStatus, source map[string][]byte) {
	t.Helper()
	cs := getSet(t, ns, name)
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: OperatorNamespace, Name: naming.SourceSecretName(cs)}, s); err != nil {
		t.Fatal(err)
	}
	s.Data = source
	if err := k8s.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	// The manager writes the status too: retried from a fresh read.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cs := getSet(t, ns, name)
		cs.Status = st
		return k8s.Status().Update(context.Background(), cs)
	}); err != nil {
		t.Fatal(err)
	}
}

// assertNoRefusals waits until the consumer pods tried every user on
// every instance again since now (each pod takes the next user on every
// instance per tick), then finds none of their logins refused.
func assertNoRefusals(t *testing.T, pc *podConsumers) {
	t.Helper()
	from := pc.attempts.Load()
	round := int64(consumerReplicas * pc.way.perPod * len(pc.way.targets()))
	waitFor(t, time.Minute, "every consumer pod tried every user on every instance", func() (bool, string) {
		n := pc.attempts.Load() - from
		return n >= 2*round, fmt.Sprintf("%d of %d logins", n, 2*round)
	})
	if n := pc.refused.Load(); n != 0 {
		t.Fatalf("%d logins of the consumer pods were refused:\n%s", n, refusalLines(pc.refusalsSince(time.Time{})))
	}
	observed(t, "%s", fmt.Sprintf("no login of the consumer pods refused (%d tried)", pc.attempts.Load()))
}
