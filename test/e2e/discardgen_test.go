package e2e

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// TestDiscardGeneration: on the real API server and a real mysqld, the
// declarative triggers GitOps edits in git: raising rotation.keyGeneration
// rotates, and raising rotation.discardGeneration to the generation that
// rotation produces discards it — the old password is then refused. A
// discardGeneration that names another generation discards nothing, and
// one commit raising both rotates and discards.
func TestDiscardGeneration(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{NoReplicas: true})
	startManager(t, cp.Config)
	ns := newNamespace(t)
	const name = "gitops"
	cs := appUserSet(t, ns, name, c)
	cs.Spec.Rotation = v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: ptr.To(int64(1))}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, name, v1.PhaseIdle, 1)
	keys := map[string]string{strings.ToUpper(name) + "_PASSWORD": name}
	gen1 := userPasswords(sourceData(t, cs), keys, "")

	setGenerations(t, ns, name, 2, 0)
	cs = waitPhase(t, ns, name, v1.PhaseDistributed, 1)
	gen2 := userPasswords(sourceData(t, cs), keys, "_PENDING")

	// The generation in force, not the one being made: nothing happens.
	setGenerations(t, ns, name, 2, 1)
	cs = waitObserved(t, ns, name)
	if st := cs.Status; st.Phase != v1.PhaseDistributed || st.KeyGeneration != 1 {
		t.Fatalf("discardGeneration 1 discarded the rotation to 2: %s", stateOf(cs))
	}
	loginMatrix(t, "discardGeneration 1: both passwords work", c.Instances(), gen1, nil)
	loginMatrix(t, "discardGeneration 1: both passwords work", c.Instances(), gen2, nil)

	setGenerations(t, ns, name, 2, 2)
	cs = waitPhase(t, ns, name, v1.PhaseIdle, 2)
	if cs.Status.LastRotationID != "keygeneration-2" {
		t.Fatalf("last rotation %q, want keygeneration-2", cs.Status.LastRotationID)
	}
	loginMatrix(t, "discardGeneration 2", c.Instances(), gen2, gen1)

	// A discardGeneration left at 2 does not discard the rotation to 3.
	setGenerations(t, ns, name, 3, 2)
	cs = waitPhase(t, ns, name, v1.PhaseDistributed, 2)
	cs = waitObserved(t, ns, name)
	if st := cs.Status; st.Phase != v1.PhaseDistributed || st.RotationID != "keygeneration-3" {
		t.Fatalf("discardGeneration 2 discarded the rotation to 3: %s", stateOf(cs))
	}
	gen3 := userPasswords(sourceData(t, cs), keys, "_PENDING")
	setGenerations(t, ns, name, 3, 3)
	cs = waitPhase(t, ns, name, v1.PhaseIdle, 3)
	loginMatrix(t, "discardGeneration 3", c.Instances(), gen3, gen2)

	// One commit raising both rotates and discards.
	setGenerations(t, ns, name, 4, 4)
	cs = waitPhase(t, ns, name, v1.PhaseIdle, 4)
	if cs.Status.LastRotationID != "keygeneration-4" {
		t.Fatalf("last rotation %q, want keygeneration-4", cs.Status.LastRotationID)
	}
	loginMatrix(t, "keyGeneration and discardGeneration 4", c.Instances(), userPasswords(sourceData(t, cs), keys, ""), gen3)

	// Admission: a generation is at least 1.
	bad := preparedAdminSet(t, newNamespace(t), "bad", c)
	bad.Spec.Rotation.DiscardGeneration = ptr.To(int64(0))
	err := k8s.Create(ctxT(t), bad)
	if err == nil || !strings.Contains(err.Error(), "spec.rotation.discardGeneration") {
		t.Fatalf("discardGeneration 0: %v, want a rejection naming spec.rotation.discardGeneration", err)
	}
}

// setGenerations sets rotation.keyGeneration and, when above 0,
// rotation.discardGeneration, as a commit in git would.
func setGenerations(t testing.TB, ns, name string, keygen, discard int64) {
	t.Helper()
	updateSpec(t, ns, name, func(cs *v1.CredentialSet) {
		cs.Spec.Rotation.KeyGeneration = ptr.To(keygen)
		cs.Spec.Rotation.DiscardGeneration = nil
		if discard > 0 {
			cs.Spec.Rotation.DiscardGeneration = ptr.To(discard)
		}
	})
}

// waitObserved waits until the manager has reconciled the set's latest spec.
func waitObserved(t testing.TB, ns, name string) *v1.CredentialSet {
	t.Helper()
	var cs *v1.CredentialSet
	eventually(t, time.Minute, "observedGeneration", func() (bool, string) {
		cs = getSet(t, ns, name)
		return cs.Status.ObservedGeneration == cs.Generation, stateOf(cs)
	})
	return cs
}
