package e2e

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestMySQLUserListedAgain: a user removed from spec.mysql.users while a
// rotation is Distributed (its consumer pods already on the rotation's
// password), the discard done without it, then listed again, on a real
// primary and replica with consumer pods that read their Secret at start.
// The discard leaves the user accepting both its passwords and its new
// one pending in the source Secret, with no rotation. Listed again, the
// set recovers by itself: the pods restart onto the current password,
// then every instance is reset to it; no pod login is refused, and the
// set rotates again afterwards. Before, the set stayed Idle with the
// leftover (no repair of that user, a rotate refused, nothing to restart
// the pods), as the explorer found.
func TestMySQLUserListedAgain(t *testing.T) {
	c, ns, set := twoUserSet(t, "lst")
	keys := map[string]string{"LST_PASSWORD": "lst", "LST2_PASSWORD": "lst2"}
	pc := deployConsumers(t, set, keys, c.Instances)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "lst", v1.PhaseIdle, 1)
	gen1 := userPasswords(sourceData(t, cs), keys, "")
	setUsers := func(names ...string) { setMySQLUsers(t, ns, "lst", names...) }

	rotate(t, ns, "lst", "r1")
	waitRolledOut(t, ns, "lst")
	r1 := userPasswords(sourceData(t, getSet(t, ns, "lst")), keys, engine.PendingSuffix)
	setUsers("lst2")
	discard(t, ns, "lst", "r1")
	cs = waitPhase(t, ns, "lst", v1.PhaseIdle, 2)
	if got := string(sourceData(t, cs)["LST_PASSWORD"+engine.PendingSuffix]); got != r1["lst"] {
		t.Fatal("the discard without lst did not leave its new password pending in the source Secret")
	}
	loginMatrix(t, "after the discard without lst", c.Instances(), map[string]string{"lst": gen1["lst"], "lst2": r1["lst2"]}, map[string]string{"lst2": gen1["lst2"]})
	loginMatrix(t, "after the discard without lst", c.Instances(), map[string]string{"lst": r1["lst"]}, nil)
	observed(t, "lst removed while r1 was Distributed; the discard went on without it, which accepts both of its passwords")

	before := restartOf(t, ns, "lst-app")
	setUsers("lst2", "lst")
	note := waitEventNoting(t, ns, "lst", reason.RecoveryStarted, "LST_PASSWORD")
	mustContain(t, "the recovery's event", note, "listed again", "restarts them onto the current secrets")
	waitFor(t, 3*time.Minute, "the recovery it started by itself done and rolled out", func() (bool, string) {
		cs := getSet(t, ns, "lst")
		done := meta.IsStatusConditionTrue(cs.Status.Conditions, "RolloutComplete")
		return strings.HasPrefix(cs.Status.LastRecoverID, "leftover-") && !cs.Status.ResetPending && done, stateOf(cs)
	})
	if got := restartOf(t, ns, "lst-app"); got == before {
		t.Fatalf("the consumer pods were not restarted onto the current password (%s)", got)
	}
	cs = getSet(t, ns, "lst")
	if _, ok := sourceData(t, cs)["LST_PASSWORD"+engine.PendingSuffix]; ok || cs.Status.KeyGeneration != 2 {
		t.Fatalf("after the recovery: pending left %v, generation %d", ok, cs.Status.KeyGeneration)
	}
	loginMatrix(t, "after the recovery", c.Instances(), map[string]string{"lst": gen1["lst"], "lst2": r1["lst2"]}, map[string]string{"lst": r1["lst"], "lst2": gen1["lst2"]})
	assertNoRefusals(t, pc)
	observed(t, "lst listed again: recovered by itself; its pods restarted onto the current password, then r1's refused everywhere")

	rotate(t, ns, "lst", "r2")
	waitRolledOut(t, ns, "lst")
	discard(t, ns, "lst", "r2")
	cs = waitPhase(t, ns, "lst", v1.PhaseIdle, 3)
	gen3 := userPasswords(sourceData(t, cs), keys, "")
	loginMatrix(t, "after r2", c.Instances(), gen3, map[string]string{"lst": gen1["lst"], "lst2": r1["lst2"]})
	assertNoRefusals(t, pc)
}

// twoUserSet is a real primary and replica on a full control plane, a
// manager, and set name (not created yet) rotating users name and name2,
// with an admin it does not rotate.
func twoUserSet(t *testing.T, name string) (*testenv.MySQLCluster, string, *v1.CredentialSet) {
	t.Helper()
	c := matrixCluster(t, testenv.MySQLOptions{Replicas: 1})
	prepareAdmin(t, c.Instances(), "ops-admin", opsAdminPassword)
	startManager(t, cp.Config)
	ns := newNamespace(t)
	set := preparedAdminSet(t, ns, name, c)
	set.Spec.MySQL.Users = append(set.Spec.MySQL.Users, v1.MySQLUser{Name: name + "2"})
	return c, ns, set
}

// setMySQLUsers makes set ns/name's spec list exactly users.
func setMySQLUsers(t *testing.T, ns, name string, users ...string) {
	t.Helper()
	updateSpec(t, ns, name, func(cs *v1.CredentialSet) {
		cs.Spec.MySQL.Users = nil
		for _, n := range users {
			cs.Spec.MySQL.Users = append(cs.Spec.MySQL.Users, v1.MySQLUser{Name: n})
		}
	})
}
