package e2e

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// TestDeletePolicyRepairsWhileInUse: a set deleted with deletionPolicy
// Delete waits for its consumer Deployment to go (UsersInUse), on a real
// primary and replica with consumer pods that read their Secret at start.
// The replica is rebuilt from an empty data directory meanwhile: the pods
// still log in with the current passwords, so the wait gives the rebuilt
// replica the set's users again, and no pod login is refused. Once the
// Deployment is gone, the set winds down and drops the users it created.
// Before, nothing was repaired until the consumers were gone (the
// explorer's path: delete, replica rebuilt, reconcile).
func TestDeletePolicyRepairsWhileInUse(t *testing.T) {
	c, ns, set := twoUserSet(t, "inuse")
	set.Spec.DeletionPolicy = v1.DeletionDelete
	keys := map[string]string{"INUSE_PASSWORD": "inuse", "INUSE2_PASSWORD": "inuse2"}
	targets := &probeTargets{insts: c.Instances()}
	pc := deployConsumers(t, set, keys, targets.list)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "inuse", v1.PhaseIdle, 1)
	cur := userPasswords(sourceData(t, cs), keys, "")

	if err := k8s.Delete(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "UsersInUse event", waitEvent(t, ns, "inuse", string(reason.UsersInUse)), "inuse-app")
	rebuildReplica(t, c, targets, "while the deleted set waits for its consumers", nil, cur)
	loginMatrix(t, "while the deleted set waits for its consumers", c.Instances(), cur, nil)
	assertNoRefusals(t, pc)

	pc.halt()
	if err := k8s.Delete(ctxT(t), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inuse-app"}}); err != nil {
		t.Fatal(err)
	}
	waitSetGone(t, ns, "inuse")
	loginMatrix(t, "after the wind-down", c.Instances(), nil, cur)
}
