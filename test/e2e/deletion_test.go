package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// Deleting a set must leave nothing valid behind that the user did not
// choose to keep, and must never lock out a consumer: these tests delete
// MySQL sets under each deletion policy, in Idle and while Distributed,
// and check who can log in with which password and what the Secrets hold.

// TestDeletion runs its cases on one MySQL cluster, each in a namespace
// of its own.
func TestDeletion(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	prepareAdmin(t, c.Instances(), "ops-admin", "ops-admin-password-for-tests")
	startManager(t, cp.Config)
	t.Run("WaitsForTheRotation", func(t *testing.T) { deletionWaitsForTheRotation(t, c) })
	t.Run("Policies", func(t *testing.T) { deletionPolicies(t, c) })
	t.Run("InTerminatingNamespace", func(t *testing.T) { deletionInTerminatingNamespace(t, c) })
}

// deletionWaitsForTheRotation: a set deleted while Distributed (default
// policy Discard) keeps both passwords valid and its finalizer until the
// rotation completes; then only the new password is valid, the
// distribution Secret still holds it, and the source Secret is emptied.
func deletionWaitsForTheRotation(t *testing.T, c *testenv.MySQLCluster) {
	ns := newNamespace(t)
	keys := map[string]string{"LEDGER_PASSWORD": "ledger"}
	cs := preparedAdminSet(t, ns, "ledger", c)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "ledger", v1.PhaseIdle, 1)
	if !slices.Contains(cs.Finalizers, naming.DeprovisionFinalizer) {
		t.Fatalf("a set with the default deletion policy has no %s finalizer: %v", naming.DeprovisionFinalizer, cs.Finalizers)
	}
	gen1 := userPasswords(sourceData(t, cs), keys, "")
	rotate(t, ns, "ledger", "ledger-1")
	cs = waitPhase(t, ns, "ledger", v1.PhaseDistributed, 1)
	gen2 := userPasswords(sourceData(t, cs), keys, engine.PendingSuffix)

	if err := k8s.Delete(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "DeletionWaiting", waitEvent(t, ns, "ledger", string(reason.DeletionWaiting)), "ledger-1")
	// A rotate request on a deleted set starts nothing.
	rotate(t, ns, "ledger", "ledger-2")
	holdsFor(t, 2*time.Second, "the deleted set stays Distributed with both passwords", func() (bool, string) {
		cs := getSet(t, ns, "ledger")
		return cs.Status.Phase == v1.PhaseDistributed && cs.Status.RotationID == "ledger-1", stateOf(cs)
	})
	loginMatrix(t, "deleted while Distributed", c.Instances(), gen1, nil)
	loginMatrix(t, "deleted while Distributed", c.Instances(), gen2, nil)

	discard(t, ns, "ledger", "ledger-1")
	waitSetGone(t, ns, "ledger")
	waitEvent(t, ns, "ledger", string(reason.Released))
	loginMatrix(t, "after the deletion completed", c.Instances(), gen2, gen1)
	if got := userPasswords(secretData(t, ns, "ledger-db"), keys, ""); !equalMaps(got, gen2) {
		t.Fatal("the distribution Secret must keep the credentials consumers use")
	}
	if left := secretData(t, OperatorNamespace, naming.SourceSecretName(cs)); len(left) != 0 {
		t.Fatalf("the source Secret keeps %d keys after deletion", len(left))
	}
}

// deletionPolicies: Delete drops the user rekey created; Retain changes
// nothing; a set waiting for its rotation lets go at
// once when its policy becomes Retain, leaving both passwords valid.
func deletionPolicies(t *testing.T, c *testenv.MySQLCluster) {
	ns := newNamespace(t)
	gone := preparedAdminSet(t, ns, "scratch", c)
	gone.Spec.DeletionPolicy = v1.DeletionDelete
	loose := gone.DeepCopy()
	loose.Name, loose.Spec.DeletionPolicy = "loose", v1.DeletionRetain
	loose.Spec.MySQL.Users = []v1.MySQLUser{{Name: "loose"}}
	loose.Spec.Distribution = []v1.SecretTarget{{Namespace: ns, Name: "loose-db"}}
	kept := gone.DeepCopy()
	kept.Name, kept.Spec.DeletionPolicy = "archive", ""
	kept.Spec.MySQL.Users = []v1.MySQLUser{{Name: "archive"}}
	kept.Spec.Distribution = []v1.SecretTarget{{Namespace: ns, Name: "archive-db"}}
	for _, cs := range []*v1.CredentialSet{gone, loose, kept} {
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
	}
	gone = waitPhase(t, ns, "scratch", v1.PhaseIdle, 1)
	scratch := userPasswords(sourceData(t, gone), map[string]string{"SCRATCH_PASSWORD": "scratch"}, "")
	loose = waitPhase(t, ns, "loose", v1.PhaseIdle, 1)
	looseKeys := map[string]string{"LOOSE_PASSWORD": "loose"}
	loose1 := userPasswords(sourceData(t, loose), looseKeys, "")
	kept = waitPhase(t, ns, "archive", v1.PhaseIdle, 1)
	archiveKeys := map[string]string{"ARCHIVE_PASSWORD": "archive"}
	archive1 := userPasswords(sourceData(t, kept), archiveKeys, "")
	rotate(t, ns, "archive", "archive-1")
	kept = waitPhase(t, ns, "archive", v1.PhaseDistributed, 1)
	archive2 := userPasswords(sourceData(t, kept), archiveKeys, engine.PendingSuffix)

	for _, cs := range []*v1.CredentialSet{gone, loose, kept} {
		if err := k8s.Delete(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
	}
	waitSetGone(t, ns, "scratch")
	mustContain(t, "Deprovisioned", waitEvent(t, ns, "scratch", string(reason.Deprovisioned)), "deletionPolicy Delete")
	loginMatrix(t, "after Delete", c.Instances(), nil, scratch)

	waitSetGone(t, ns, "loose")
	mustContain(t, "Retained", waitEvent(t, ns, "loose", string(reason.Retained)), "changed nothing")
	loginMatrix(t, "after Retain", c.Instances(), loose1, nil)
	if src := secretData(t, OperatorNamespace, naming.SourceSecretName(loose)); len(src) == 0 {
		t.Fatal("Retain must keep the source Secret")
	}

	mustContain(t, "DeletionWaiting", waitEvent(t, ns, "archive", string(reason.DeletionWaiting)), "archive-1")
	updateSpec(t, ns, "archive", func(cs *v1.CredentialSet) { cs.Spec.DeletionPolicy = v1.DeletionRetain })
	waitSetGone(t, ns, "archive")
	mustContain(t, "Retained", waitEvent(t, ns, "archive", string(reason.Retained)), "archive-1", "both")
	loginMatrix(t, "after Retain mid-rotation: both passwords", c.Instances(), archive1, nil)
	loginMatrix(t, "after Retain mid-rotation: both passwords", c.Instances(), archive2, nil)
}

// deletionInTerminatingNamespace: a namespace being deleted takes the set's
// consumers and Secrets with it, so the rotation in flight cannot complete;
// the set winds down at once, rolled back to its current password, instead
// of holding the namespace forever.
func deletionInTerminatingNamespace(t *testing.T, c *testenv.MySQLCluster) {
	ns := newNamespace(t)
	keys := map[string]string{"TEMP_PASSWORD": "temp"}
	cs := preparedAdminSet(t, ns, "temp", c)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "temp", v1.PhaseIdle, 1)
	gen1 := userPasswords(sourceData(t, cs), keys, "")
	rotate(t, ns, "temp", "temp-1")
	cs = waitPhase(t, ns, "temp", v1.PhaseDistributed, 1)
	gen2 := userPasswords(sourceData(t, cs), keys, engine.PendingSuffix)

	terminateNamespace(t, ns)
	if err := k8s.Delete(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitSetGone(t, ns, "temp")
	loginMatrix(t, "wound down in a terminating namespace", c.Instances(), gen1, gen2)
	if left := secretData(t, OperatorNamespace, naming.SourceSecretName(cs)); len(left) != 0 {
		t.Fatalf("the source Secret keeps %d keys after deletion", len(left))
	}
}

func waitSetGone(t testing.TB, ns, name string) {
	t.Helper()
	// A wind-down after a held deletion's recovery runs several ceph CLI
	// calls, each seconds long on a loaded machine (TestCephRestoredGeneration
	// ran out of a minute at load 17).
	eventually(t, 3*time.Minute, name+" deleted", func() (bool, string) {
		cs := &v1.CredentialSet{}
		err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: name}, cs)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, stateOf(cs) + " finalizers " + strings.Join(cs.Finalizers, ",")
	})
}

// deleteWithPolicyDelete sets deletionPolicy Delete on a set that declares
// consumers, waits until the manager holds a finalizer for them, and
// deletes the set.
func deleteWithPolicyDelete(t testing.TB, ns, name string) {
	t.Helper()
	updateSpec(t, ns, name, func(cs *v1.CredentialSet) { cs.Spec.DeletionPolicy = v1.DeletionDelete })
	eventually(t, 30*time.Second, name+" holds its consumers' finalizers", func() (bool, string) {
		cs := getSet(t, ns, name)
		return slices.ContainsFunc(cs.Finalizers, func(f string) bool {
			return strings.HasPrefix(f, naming.ConsumerFinalizerPrefix)
		}), strings.Join(cs.Finalizers, ",")
	})
	if err := k8s.Delete(ctxT(t), getSet(t, ns, name)); err != nil {
		t.Fatal(err)
	}
}

// TestDeletionCrashSafety kills the manager at each step of winding a
// deleted set down — between instances, after the backend step, after the
// source Secret was emptied — and shows a fresh manager finishes it: a set
// deleted with Delete leaves its user on no instance, one deleted with
// Discard leaves its user logging in everywhere with the password
// consumers hold, without rekey's mark.
func TestDeletionCrashSafety(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	prepareAdmin(t, c.Instances(), "ops-admin", "ops-admin-password-for-tests")
	ns := newNamespace(t)
	gone := preparedAdminSet(t, ns, "dropped", c)
	gone.Spec.DeletionPolicy = v1.DeletionDelete
	kept := gone.DeepCopy()
	kept.Name, kept.Spec.DeletionPolicy = "released", ""
	kept.Spec.MySQL.Users = []v1.MySQLUser{{Name: "released"}}
	kept.Spec.Distribution = []v1.SecretTarget{{Namespace: ns, Name: "released-db"}}
	m := startManagerProcess(t, "")
	for _, cs := range []*v1.CredentialSet{gone, kept} {
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
	}
	gone = waitPhase(t, ns, "dropped", v1.PhaseIdle, 1)
	dropped := userPasswords(sourceData(t, gone), map[string]string{"DROPPED_PASSWORD": "dropped"}, "")
	kept = waitPhase(t, ns, "released", v1.PhaseIdle, 1)
	released := userPasswords(sourceData(t, kept), map[string]string{"RELEASED_PASSWORD": "released"}, "")
	m.stop()

	for _, step := range []struct {
		set *v1.CredentialSet
		fps []string
	}{
		{gone, []string{"deprovision/instance-done:1", "delete/backend-wound-down", "delete/source-emptied"}},
		{kept, []string{"release/instance-done:2", "delete/source-emptied"}},
	} {
		if err := k8s.Delete(ctxT(t), step.set); err != nil {
			t.Fatal(err)
		}
		for _, fp := range step.fps {
			startManagerProcess(t, fp).waitKilled(t, fp)
			observed(t, "manager killed at %s while deleting %s", fp, step.set.Name)
		}
		m := startManagerProcess(t, "")
		waitSetGone(t, ns, step.set.Name)
		m.stop()
		if left := secretData(t, OperatorNamespace, naming.SourceSecretName(step.set)); len(left) != 0 {
			t.Fatalf("%s: the source Secret keeps %d keys after deletion", step.set.Name, len(left))
		}
	}

	// A set wound down mid-rotation (its namespace is being deleted) is
	// reset to its current password before its source Secret is emptied;
	// a manager that starts after that finds nothing to reset with and
	// must leave the password alone.
	ns2 := newNamespace(t)
	rolled := preparedAdminSet(t, ns2, "rolled", c)
	m = startManagerProcess(t, "")
	if err := k8s.Create(ctxT(t), rolled); err != nil {
		t.Fatal(err)
	}
	rolled = waitPhase(t, ns2, "rolled", v1.PhaseIdle, 1)
	rolledKeys := map[string]string{"ROLLED_PASSWORD": "rolled"}
	rolled1 := userPasswords(sourceData(t, rolled), rolledKeys, "")
	rotate(t, ns2, "rolled", "rolled-1")
	rolled = waitPhase(t, ns2, "rolled", v1.PhaseDistributed, 1)
	rolled2 := userPasswords(sourceData(t, rolled), rolledKeys, engine.PendingSuffix)
	m.stop()
	terminateNamespace(t, ns2)
	if err := k8s.Delete(ctxT(t), rolled); err != nil {
		t.Fatal(err)
	}
	startManagerProcess(t, "delete/source-emptied").waitKilled(t, "delete/source-emptied")
	m = startManagerProcess(t, "")
	waitSetGone(t, ns2, "rolled")
	m.stop()
	loginMatrix(t, "wound down mid-rotation, killed after the source Secret was emptied", c.Instances(), rolled1, rolled2)

	loginMatrix(t, "after Delete, killed three times", c.Instances(), nil, dropped)
	loginMatrix(t, "after Discard, killed twice", c.Instances(), released, nil)
	for _, i := range c.Instances() {
		marks, err := i.QueryString("SELECT COUNT(*) FROM INFORMATION_SCHEMA.USER_ATTRIBUTES WHERE USER='released' AND ATTRIBUTE LIKE '%rekey.io/set%'")
		if err != nil {
			t.Fatal(err)
		}
		if marks != "0" {
			t.Fatalf("%s: the released user keeps rekey's mark", i.Name)
		}
	}
}

// terminateNamespace deletes ns. envtest runs no namespace controller: the
// namespace stays Terminating, which is what a manager sees while one works.
func terminateNamespace(t testing.TB, ns string) {
	t.Helper()
	n := &corev1.Namespace{}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Name: ns}, n); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctxT(t), n); err != nil {
		t.Fatal(err)
	}
}
