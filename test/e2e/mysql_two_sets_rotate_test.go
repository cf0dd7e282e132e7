package e2e

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestMySQLTwoSetsOneCluster: two sets of two namespaces on one real
// primary and replica, each with its own user and consumer pods that read
// their Secret at start, both connecting as one admin that neither
// rotates. Each rotates while the other is Distributed; the replica is
// rebuilt empty while both are, and each set gives it back its own user's
// two passwords; the second set (deletionPolicy Delete) completes its
// rotation and is deleted while the first is still Distributed, which
// drops its user and nothing of the first set's. No consumer login is
// refused. These are the behaviours the explorer's two-set world encodes
// (internal/explorer/twosets.go): each set's statements touch its own
// users only.
func TestMySQLTwoSetsOneCluster(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{Replicas: 1})
	prepareAdmin(t, c.Instances(), "ops-admin", opsAdminPassword)
	startManager(t, cp.Config)
	nsA, nsB := newNamespace(t), newNamespace(t)
	a, b := preparedAdminSet(t, nsA, "ledger", c), preparedAdminSet(t, nsB, "shop", c)
	b.Spec.DeletionPolicy = v1.DeletionDelete
	ka, kb := map[string]string{"LEDGER_PASSWORD": "ledger"}, map[string]string{"SHOP_PASSWORD": "shop"}
	targets := &probeTargets{insts: c.Instances()}
	pa, pb := deployConsumers(t, a, ka, targets.list), deployConsumers(t, b, kb, targets.list)
	for _, s := range []*v1.CredentialSet{a, b} {
		if err := k8s.Create(ctxT(t), s); err != nil {
			t.Fatal(err)
		}
	}
	waitPhase(t, nsA, "ledger", v1.PhaseIdle, 1)
	waitPhase(t, nsB, "shop", v1.PhaseIdle, 1)

	rotate(t, nsA, "ledger", "r1")
	csA := waitPhase(t, nsA, "ledger", v1.PhaseDistributed, 1)
	rotate(t, nsB, "shop", "r1")
	csB := waitPhase(t, nsB, "shop", v1.PhaseDistributed, 1)
	oldA, newA := userPasswords(sourceData(t, csA), ka, ""), userPasswords(sourceData(t, csA), ka, "_PENDING")
	oldB, newB := userPasswords(sourceData(t, csB), kb, ""), userPasswords(sourceData(t, csB), kb, "_PENDING")
	both := func(x, y map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range x {
			out[k] = v
		}
		for k, v := range y {
			out[k] = v
		}
		return out
	}
	loginMatrix(t, "both sets Distributed (old passwords)", c.Instances(), both(oldA, oldB), nil)
	loginMatrix(t, "both sets Distributed (new passwords)", c.Instances(), both(newA, newB), nil)

	// Rather than wait for the resync period: nothing else tells a set
	// that a host of its spec was rebuilt.
	rebuildReplica(t, c, targets, "while both sets are Distributed", func() {
		annotate(t, nsA, "ledger", "test.rekey.io/touch", "rebuilt")
		annotate(t, nsB, "shop", "test.rekey.io/touch", "rebuilt")
	}, oldA, newA, oldB, newB)

	discard(t, nsB, "shop", "r1")
	waitPhase(t, nsB, "shop", v1.PhaseIdle, 2)
	loginMatrix(t, "the second set's discard done, the first Distributed", c.Instances(), both(both(oldA, newA), newB), oldB)
	assertNoRefusals(t, pa)
	assertNoRefusals(t, pb)

	if err := k8s.Delete(ctxT(t), getSet(t, nsB, "shop")); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "UsersInUse event", waitEvent(t, nsB, "shop", string(reason.UsersInUse)), "shop-app")
	pb.halt()
	if err := k8s.Delete(ctxT(t), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "shop-app"}}); err != nil {
		t.Fatal(err)
	}
	waitSetGone(t, nsB, "shop")
	loginMatrix(t, "the second set wound down (its user dropped), the first Distributed", c.Instances(), both(oldA, newA), newB)

	discard(t, nsA, "ledger", "r1")
	waitPhase(t, nsA, "ledger", v1.PhaseIdle, 2)
	loginMatrix(t, "the first set's discard done", c.Instances(), newA, oldA)
	assertNoRefusals(t, pa)
}
