package e2e

import (
	"maps"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestDeletionWaitsForSwitchover: a set whose status and source Secret
// were restored from a backup taken before a rotation (so the instances
// accept a second password it does not account for, which its consumer
// pods hold) is deleted while a switchover is under way (the primary
// made super_read_only, the replica still replicating from it), on real
// servers with consumer pods that read their Secret at start. The
// backend's check for a second password comes after the health gate, so
// the wind-down used to go ahead blind and leave both passwords valid
// (the explorer's path). Now it waits for the roles to settle
// (ClusterUnhealthy), then holds for the second password
// (DualPasswordExists) until recover restarts the pods onto the current
// passwords and resets the instances; then the set is wound down, and no
// pod login is refused.
func TestDeletionWaitsForSwitchover(t *testing.T) {
	c, ns, set := twoUserSet(t, "swd")
	keys := map[string]string{"SWD_PASSWORD": "swd", "SWD2_PASSWORD": "swd2"}
	pc := deployConsumers(t, set, keys, c.Instances)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "swd", v1.PhaseIdle, 1)
	backupStatus, backupSource := *cs.Status.DeepCopy(), maps.Clone(sourceData(t, cs))
	gen1 := userPasswords(backupSource, keys, "")

	rotate(t, ns, "swd", "r1")
	waitRolledOut(t, ns, "swd")
	r1 := userPasswords(sourceData(t, getSet(t, ns, "swd")), keys, engine.PendingSuffix)
	restoreSet(t, ns, "swd", backupStatus, backupSource)
	if err := c.Primary.Exec("SET GLOBAL super_read_only=ON"); err != nil {
		t.Fatal(err)
	}
	observed(t, "status and source Secret restored from before r1, then a switchover begun (the primary made super_read_only)")
	if err := k8s.Delete(ctxT(t), getSet(t, ns, "swd")); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "ClusterUnhealthy event", waitEventNoting(t, ns, "swd", reason.ClusterUnhealthy, "the set is deleted"), "not wound down yet")
	loginMatrix(t, "held by the switchover", c.Instances(), gen1, nil)
	loginMatrix(t, "held by the switchover", c.Instances(), r1, nil)

	if err := c.Primary.Exec("SET GLOBAL super_read_only=OFF", "SET GLOBAL read_only=OFF"); err != nil {
		t.Fatal(err)
	}
	observed(t, "the switchover abandoned: the primary writable again")
	mustContain(t, "DualPasswordExists event", waitEventNoting(t, ns, "swd", reason.DualPasswordExists, "the set is deleted"), "kubectl rekey recover")
	annotate(t, ns, "swd", engine.RecoverAnnotation, "swd-rec")
	waitFor(t, 3*time.Minute, "the set recovered and wound down", func() (bool, string) {
		cs := &v1.CredentialSet{}
		err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "swd"}, cs)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, stateOf(cs)
	})
	// deletionPolicy Discard: the current passwords stay for the pods.
	loginMatrix(t, "after the wind-down", c.Instances(), gen1, r1)
	assertNoRefusals(t, pc)
}

// TestDeletionHeldRepairs: a set deleted while a switchover is under way
// is held (ClusterUnhealthy) until the roles settle, while its consumer
// pods still log in with the current passwords; the replica is rebuilt
// from an empty data directory meanwhile, on real servers. The hold gives
// the rebuilt replica the set's users again, as the wait for consumers
// does; before, nothing was repaired until the switchover ended (the
// explorer's path: delete, replica rebuilt, switchover begins, reconcile).
// Once the primary is writable again the set winds down (deletionPolicy
// Discard: the current passwords stay valid), and no pod login is refused.
func TestDeletionHeldRepairs(t *testing.T) {
	c, ns, set := twoUserSet(t, "hold")
	keys := map[string]string{"HOLD_PASSWORD": "hold", "HOLD2_PASSWORD": "hold2"}
	targets := &probeTargets{insts: c.Instances()}
	pc := deployConsumers(t, set, keys, targets.list)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cur := userPasswords(sourceData(t, waitPhase(t, ns, "hold", v1.PhaseIdle, 1)), keys, "")

	if err := c.Primary.Exec("SET GLOBAL super_read_only=ON"); err != nil {
		t.Fatal(err)
	}
	observed(t, "a switchover begun (the primary made super_read_only)")
	if err := k8s.Delete(ctxT(t), getSet(t, ns, "hold")); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "ClusterUnhealthy event", waitEventNoting(t, ns, "hold", reason.ClusterUnhealthy, "the set is deleted"), "not wound down yet")
	rebuildReplica(t, c, targets, "while the deleted set is held by the switchover", nil, cur)
	if cs := getSet(t, ns, "hold"); cs.DeletionTimestamp.IsZero() {
		t.Fatal("the set is no longer being deleted")
	}
	loginMatrix(t, "held by the switchover, the replica repaired", c.Instances(), cur, nil)

	if err := c.Primary.Exec("SET GLOBAL super_read_only=OFF", "SET GLOBAL read_only=OFF"); err != nil {
		t.Fatal(err)
	}
	observed(t, "the switchover abandoned: the primary writable again")
	waitSetGone(t, ns, "hold")
	loginMatrix(t, "after the wind-down", c.Instances(), cur, nil)
	assertNoRefusals(t, pc)
}
