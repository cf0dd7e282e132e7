package e2e

import (
	"context"
	"fmt"
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

// TestMySQLUserAdded: users added to spec.mysql.users of a provisioned set,
// on a real primary and replica.
//   - At rest: the user is created on every instance with a password the
//     source Secret holds, served to the distribution Secret, at the same
//     generation; the set's other user and the prober are untouched.
//   - While a rotation is Distributed: the rotation goes on and completes
//     without it (no refusal); once Idle, the user is added.
//   - A key lost from the source Secret for a user that exists is not
//     minted anew over it: the refusal names adoption, the distribution
//     Secret keeps what consumers hold, and the user still logs in with it.
//
// Before, every reconcile after the edit refused with "lacks current
// secrets; restore them from backup", and nothing rotated.
func TestMySQLUserAdded(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{Replicas: 1})
	const adminPw = "ops-admin-password-for-tests"
	prepareAdmin(t, c.Instances(), "ops-admin", adminPw)
	startManager(t, cp.Config)
	ns := newNamespace(t)
	if err := k8s.Create(ctxT(t), preparedAdminSet(t, ns, "shop", c)); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "shop", v1.PhaseIdle, 1)
	shop := map[string]string{"SHOP_PASSWORD": "shop"}
	gen1 := userPasswords(sourceData(t, cs), shop, "")
	p := startProber(t, c.Instances(), ns, "shop-db", shop)
	addUser := func(name string) {
		updateSpec(t, ns, "shop", func(cs *v1.CredentialSet) {
			cs.Spec.MySQL.Users = append(cs.Spec.MySQL.Users, v1.MySQLUser{Name: name})
		})
	}
	// served waits until key is current in the source Secret and served,
	// and returns its password.
	served := func(key string) string {
		t.Helper()
		var pw string
		waitFor(t, 2*time.Minute, key+" current and served", func() (bool, string) {
			src := sourceData(t, getSet(t, ns, "shop"))
			dist := secretData(t, ns, "shop-db")
			pw = string(src[key])
			ok := pw != "" && string(dist[key]) == pw && len(src[engine.AddingKey(key)]) == 0
			return ok, fmt.Sprintf("source has %s: %t, staged: %t; served: %t", key, pw != "", len(src[engine.AddingKey(key)]) > 0, len(dist[key]) > 0)
		})
		return pw
	}

	// At rest.
	addUser("shop2")
	pw2 := served("SHOP2_PASSWORD")
	mustContain(t, "the Provisioned event", waitEventNoting(t, ns, "shop", reason.Provisioned, "SHOP2_PASSWORD added"), "generation 1")
	if g := getSet(t, ns, "shop").Status.KeyGeneration; g != 1 {
		t.Fatalf("adding a user moved the set to generation %d", g)
	}
	loginMatrix(t, "shop2 added at rest", c.Instances(), map[string]string{"shop": gen1["shop"], "shop2": pw2}, nil)
	observed(t, "shop2, added to the spec at rest, logs in on %d instances with the password served; shop keeps generation 1", len(c.Instances()))

	// While a rotation is Distributed: it completes without shop3.
	rotate(t, ns, "shop", "r1")
	waitPhase(t, ns, "shop", v1.PhaseDistributed, 1)
	addUser("shop3")
	discard(t, ns, "shop", "r1")
	cs = waitPhase(t, ns, "shop", v1.PhaseIdle, 2)
	pw3 := served("SHOP3_PASSWORD")
	gen2 := userPasswords(sourceData(t, getSet(t, ns, "shop")), map[string]string{"SHOP_PASSWORD": "shop", "SHOP2_PASSWORD": "shop2"}, "")
	if gen2["shop2"] == pw2 {
		t.Fatal("r1 did not rotate shop2")
	}
	loginMatrix(t, "shop3 added while r1 was Distributed", c.Instances(),
		map[string]string{"shop": gen2["shop"], "shop2": gen2["shop2"], "shop3": pw3},
		map[string]string{"shop": gen1["shop"], "shop2": pw2})
	for _, cond := range cs.Status.Conditions {
		if cond.Type == reason.CondDegraded && cond.Reason == string(reason.InvalidSpec) {
			t.Fatalf("the rotation was refused for the added user: %s", cond.Message)
		}
	}
	observed(t, "r1 completed with shop3 listed mid-rotation; shop3 then added at generation 2")

	// A key lost for a user that exists: refused, nothing served anew.
	var src corev1.Secret
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: OperatorNamespace, Name: naming.SourceSecretName(cs)}, &src); err != nil {
		t.Fatal(err)
	}
	delete(src.Data, "SHOP3_PASSWORD")
	if err := k8s.Update(context.Background(), &src); err != nil {
		t.Fatal(err)
	}
	msg := waitDegraded(t, ns, "shop", reason.ProvisionFailed)
	mustContain(t, "the lost key's refusal", msg, "provisioning [SHOP3_PASSWORD]", "adoptSecretRef")
	if got := string(secretData(t, ns, "shop-db")["SHOP3_PASSWORD"]); got != pw3 {
		t.Fatal("the distribution Secret no longer serves shop3's password after its key was lost")
	}
	loginMatrix(t, "after SHOP3_PASSWORD was lost from the source Secret", c.Instances(), map[string]string{"shop3": pw3}, nil)
	p.assertNoGap(t)
}
