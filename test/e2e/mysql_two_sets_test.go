package e2e

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestMySQLSetsSharingUsers: two sets on one real cluster that would break
// each other. A set in another namespace listing the user the first set
// rotates, or the user the first set connects as, is refused before it
// runs a statement — although it was handed the password and would
// otherwise provision: the same user's secondary password would be
// retained and discarded by both, the admin's changed under the first set.
// Nothing changes on the instances, and the first set rotates with its
// consumers never refused.
func TestMySQLSetsSharingUsers(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{Replicas: 1})
	const adminPw = "ops-admin-password-for-tests"
	prepareAdmin(t, c.Instances(), "ops-admin", adminPw)
	startManager(t, cp.Config)
	ns, other := newNamespace(t), newNamespace(t)

	first := preparedAdminSet(t, ns, "ledger", c)
	if err := k8s.Create(ctxT(t), first); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "ledger", v1.PhaseIdle, 1)
	keys := map[string]string{"LEDGER_PASSWORD": "ledger"}
	gen1 := userPasswords(sourceData(t, cs), keys, "")
	p := startProber(t, c.Instances(), ns, "ledger-db", keys)
	before := map[string]string{}
	for _, i := range c.Instances() {
		before[i.Name] = userTable(t, i)
	}

	// The same user, its password handed over (copied from the first
	// set's Secret): Provision would accept it.
	createSecret(t, other, "ledger-adopt", map[string]string{"LEDGER_PASSWORD": gen1["ledger"]})
	same := preparedAdminSet(t, other, "same", c)
	same.Spec.MySQL.Users = []v1.MySQLUser{{Name: "ledger"}}
	same.Spec.MySQL.AdoptSecretRef = &v1.LocalSecretRef{Name: "ledger-adopt"}
	// The user the first set connects as, rotated by a set connecting as
	// it too (the admin's password is adopted from passwordSecretRef).
	taker := same.DeepCopy()
	taker.Name = "taker"
	taker.Spec.MySQL.Users = []v1.MySQLUser{{Name: "ops-admin"}}
	taker.Spec.MySQL.AdoptSecretRef = nil
	taker.Spec.Distribution = []v1.SecretTarget{{Namespace: other, Name: "taker-db"}}
	for _, s := range []*v1.CredentialSet{same, taker} {
		if err := k8s.Create(ctxT(t), s); err != nil {
			t.Fatal(err)
		}
	}
	for name, says := range map[string][]string{
		"same":  {"a CredentialSet in another namespace", "user ledger@% too", "Remove ledger@% from spec.mysql.users", "This set changed nothing"},
		"taker": {"a CredentialSet in another namespace", "it connects as ops-admin", "Remove ops-admin@% from spec.mysql.users", "This set changed nothing"},
	} {
		msg := waitDegraded(t, other, name, reason.InvalidSpec)
		mustContain(t, name+"'s InvalidSpec condition", msg, says...)
		mustContain(t, name+"'s InvalidSpec event", waitEvent(t, other, name, string(reason.InvalidSpec)), says[:2]...)
		// The first set is in a namespace the other's readers may not see.
		if strings.Contains(msg, ns) {
			t.Fatalf("%s's refusal names the first set's namespace %s: %q", name, ns, msg)
		}
		if g := getSet(t, other, name).Status.KeyGeneration; g != 0 {
			t.Fatalf("the refused set %s reached generation %d", name, g)
		}
	}
	for _, i := range c.Instances() {
		if after := userTable(t, i); after != before[i.Name] {
			t.Fatalf("%s: the accounts changed while the two sets were refused:\nbefore %s\nafter  %s", i.Name, before[i.Name], after)
		}
	}
	observed(t, "mysql.user unchanged on %d instances after both refusals", len(c.Instances()))

	// The first set rotates as if the others had never been created.
	rotate(t, ns, "ledger", "r1")
	waitPhase(t, ns, "ledger", v1.PhaseDistributed, 1)
	discard(t, ns, "ledger", "r1")
	cs = waitPhase(t, ns, "ledger", v1.PhaseIdle, 2)
	gen2 := userPasswords(sourceData(t, cs), keys, "")
	loginMatrix(t, "after the first set's rotation", c.Instances(), gen2, gen1)
	loginMatrix(t, "the first set's admin", c.Instances(), map[string]string{"ops-admin": adminPw}, nil)
	p.assertNoGap(t)
	for _, name := range []string{"same", "taker"} {
		if cond := condition(getSet(t, other, name), reason.CondDegraded); cond == nil || cond.Reason != string(reason.InvalidSpec) {
			t.Fatalf("%s is no longer refused after the first set's rotation: %v", name, cond)
		}
	}
}
