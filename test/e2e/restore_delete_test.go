package e2e

import (
	"context"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestRestoreThenDelete replays the explorer's restore-then-delete path
// (TestPathRestoreThenDelete) on a real mysqld cluster and a real control
// plane with consumer pods that read their Secret at start: a set is
// Distributed, its consumers run the rotation's password, its status and
// source Secret are restored from a backup taken while Idle, and it is
// deleted (deletionPolicy Discard). It looks Idle, yet every instance
// accepts the rotation's password with the old one as its secondary: a
// wind-down then would leave both valid. It holds instead, Degraded
// DualPasswordExists naming kubectl rekey recover, its source Secret kept;
// recover restarts the consumers onto the current secrets and resets the
// backend, and the wind-down follows: the set is gone, one password per
// user is valid, and no consumer login was refused.
func TestRestoreThenDelete(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	keys := map[string]string{"RD_PASSWORD": "rd"}
	set := appUserSet(t, ns, "rd", c)
	pc := deployConsumers(t, set, keys, c.Instances)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "rd", v1.PhaseIdle, 1)
	cur := userPasswords(sourceData(t, cs), keys, "")
	backupStatus, backupSource := *cs.Status.DeepCopy(), maps.Clone(sourceData(t, cs))
	mk := matrixMark(t, nil, "set Distributed, its status and source Secret restored from a backup taken while Idle, then deleted")

	rotate(t, ns, "rd", "rd-1")
	waitRolledOut(t, ns, "rd")
	pending := userPasswords(sourceData(t, getSet(t, ns, "rd")), keys, engine.PendingSuffix)
	restoreSet(t, ns, "rd", backupStatus, backupSource)
	observed(t, "status and source Secret restored from the backup taken while Idle")
	if err := k8s.Delete(ctxT(t), getSet(t, ns, "rd")); err != nil {
		t.Fatal(err)
	}
	msg := waitDegraded(t, ns, "rd", reason.DualPasswordExists)
	mustContain(t, "the Degraded condition of the held set", msg, "rd@%", "kubectl rekey recover")
	mustContain(t, "its Warning", waitEvent(t, ns, "rd", string(reason.DualPasswordExists)), "kubectl rekey recover")
	if held := getSet(t, ns, "rd"); held.DeletionTimestamp.IsZero() {
		t.Fatal("the set is not being deleted")
	}
	src := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: OperatorNamespace, Name: naming.SourceSecretName(set)}, src); err != nil || len(src.Data) == 0 {
		t.Fatalf("the held set's source Secret was emptied or removed (%v)", err)
	}
	// Both still valid while it holds: what a wind-down now would leave.
	loginMatrix(t, "while the deleted set holds", c.Instances(), pending, nil)
	loginMatrix(t, "while the deleted set holds (the restored current password)", c.Instances(), cur, nil)
	observed(t, "the deleted set holds, Degraded DualPasswordExists naming recover; source Secret kept")

	annotate(t, ns, "rd", engine.RecoverAnnotation, "rd-rec-1")
	mk.resume()
	waitSetGoneWithin(t, ns, "rd", 3*time.Minute)
	mk.reached()
	loginMatrix(t, "after the wind-down", c.Instances(), cur, pending)
	assertNoDualPassword(t, c)
	assertNoRefusals(t, pc)
	mk.done(t, "held until recover restarted the consumers onto the current secrets and reset the backend; then gone with one password per user valid; no consumer login refused")
}
