package e2e

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestMySQLUserListedMidRotation: a user removed from spec.mysql.users
// before a rotation starts, and listed again while it is Distributed, on
// a real primary and replica with consumer pods that read their Secret at
// start. The rotation began without it (status.rotationKeys), so the
// source Secret holds no new password for it: it keeps its current one,
// which is served again and logs in everywhere, and the rotation completes
// without it. The replica, rebuilt from an empty data directory while
// Distributed, is given the user again with that password beside the
// rotation's users. Before, the set read the missing new password as one
// deleted by hand: every reconcile refused with MissingRotationPending,
// nothing was repaired, and the discard never ran (the explorer's path).
func TestMySQLUserListedMidRotation(t *testing.T) {
	c, ns, set := twoUserSet(t, "mid")
	keys := map[string]string{"MID_PASSWORD": "mid", "MID2_PASSWORD": "mid2"}
	// The pods log in as mid2, the user that rotates, on the instances
	// listed in targets (the replica leaves while it is rebuilt).
	targets := &probeTargets{insts: c.Instances()}
	pc := deployConsumers(t, set, map[string]string{"MID2_PASSWORD": "mid2"}, targets.list)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "mid", v1.PhaseIdle, 1)
	gen1 := userPasswords(sourceData(t, cs), keys, "")
	setUsers := func(names ...string) { setMySQLUsers(t, ns, "mid", names...) }

	setUsers("mid2")
	rotate(t, ns, "mid", "r1")
	waitRolledOut(t, ns, "mid")
	cs = getSet(t, ns, "mid")
	if !slices.Equal(cs.Status.RotationKeys, []string{"MID2_PASSWORD"}) {
		t.Fatalf("status.rotationKeys %v, want the keys r1 began with, [MID2_PASSWORD]", cs.Status.RotationKeys)
	}
	r1 := userPasswords(sourceData(t, cs), map[string]string{"MID2_PASSWORD": "mid2"}, engine.PendingSuffix)
	observed(t, "mid removed, then r1 started and rolled out without it")

	setUsers("mid2", "mid")
	waitFor(t, 2*time.Minute, "mid's current password served again beside r1's", func() (bool, string) {
		d := secretData(t, ns, "mid-db")
		cs := getSet(t, ns, "mid")
		return string(d["MID_PASSWORD"]) == gen1["mid"] && string(d["MID2_PASSWORD"]) == r1["mid2"], stateOf(cs)
	})
	loginMatrix(t, "mid listed again while r1 is Distributed", c.Instances(),
		map[string]string{"mid": gen1["mid"], "mid2": r1["mid2"]}, nil)
	loginMatrix(t, "mid listed again while r1 is Distributed", c.Instances(), map[string]string{"mid2": gen1["mid2"]}, nil)
	if c := meta.FindStatusCondition(getSet(t, ns, "mid").Status.Conditions, reason.CondDegraded); c != nil && c.Status == "True" {
		t.Fatalf("the set is degraded after mid was listed again: %s: %s", c.Reason, c.Message)
	}

	replica := c.Replicas[0]
	targets.remove(replica)
	reinitWithOpsAdmin(t, replica, c.Primary)
	annotate(t, ns, "mid", "test.rekey.io/touch", "rebuilt") // rather than wait for the repair's poll
	waitFor(t, 2*time.Minute, "the rebuilt replica given mid's current password and both of mid2's", func() (bool, string) {
		ok := replica.CanLogin("mid", gen1["mid"]) == nil && replica.CanLogin("mid2", r1["mid2"]) == nil && replica.CanLogin("mid2", gen1["mid2"]) == nil
		return ok, stateOf(getSet(t, ns, "mid"))
	})
	targets.add(replica)
	observed(t, "the replica rebuilt empty while r1 is Distributed: repaired with mid's current password beside r1's")

	discard(t, ns, "mid", "r1")
	cs = waitPhase(t, ns, "mid", v1.PhaseIdle, 2)
	if len(cs.Status.RotationKeys) != 0 {
		t.Fatalf("status.rotationKeys %v left after r1 completed", cs.Status.RotationKeys)
	}
	data := sourceData(t, cs)
	if got := string(data["MID_PASSWORD"]); got != gen1["mid"] {
		t.Fatal("mid's current password changed although r1 began without it")
	}
	if _, ok := data["MID_PASSWORD"+engine.PendingSuffix]; ok {
		t.Fatal("a new password for mid was left in the source Secret")
	}
	loginMatrix(t, "r1 completed", c.Instances(), map[string]string{"mid": gen1["mid"], "mid2": r1["mid2"]}, map[string]string{"mid2": gen1["mid2"]})
	assertNoRefusals(t, pc)

	rotate(t, ns, "mid", "r2")
	waitRolledOut(t, ns, "mid")
	discard(t, ns, "mid", "r2")
	cs = waitPhase(t, ns, "mid", v1.PhaseIdle, 3)
	gen3 := userPasswords(sourceData(t, cs), keys, "")
	loginMatrix(t, "after r2, which mid took part in", c.Instances(), gen3, map[string]string{"mid": gen1["mid"], "mid2": r1["mid2"]})
	assertNoRefusals(t, pc)
}
