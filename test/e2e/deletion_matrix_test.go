package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// The deletion matrix of one backend: a set per deletion policy (Discard,
// Delete, Retain) and phase at deletion (Idle after a completed rotation,
// so that a prior generation existed; Distributed, with the old and the
// new credentials both valid). Each is deleted, and the backend's own
// logins say what stays valid: the old credentials never once a Discard or
// Delete set is gone, the current ones only under Discard (and Retain,
// which changes nothing), and the source Secret is emptied unless Retain.
// MySQL's crash points and terminating namespaces are TestDeletion's and
// TestDeletionCrashSafety's.

// deletionBackend is what the matrix needs of one backend.
type deletionBackend struct {
	// newSet is a set named name whose identities are named after it.
	newSet func(t testing.TB, ns, name string) *v1.CredentialSet
	// creds are the credentials source data holds under keys ending in
	// suffix ("" for the current ones, engine.PendingSuffix).
	creds func(t testing.TB, data map[string][]byte, suffix string) []cred
	// accepts says, per server of the backend, whether it accepts c.
	accepts func(t testing.TB, c cred) []bool
}

// cred is an identity and its secret (a password, a cephx key).
type cred struct{ user, secret string }

// deletionCell is one set of the matrix.
type deletionCell struct {
	policy      v1.DeletionPolicy
	distributed bool
}

// name is the set's name, which also names its identities (PostgreSQL
// bases allow no dash).
func (c deletionCell) name() string {
	phase := "idle"
	if c.distributed {
		phase = "dist"
	}
	return strings.ToLower(string(c.policy)) + phase
}

func deletionCells() []deletionCell {
	var out []deletionCell
	for _, p := range []v1.DeletionPolicy{v1.DeletionDiscard, v1.DeletionDelete, v1.DeletionRetain} {
		for _, d := range []bool{false, true} {
			out = append(out, deletionCell{p, d})
		}
	}
	return out
}

// cellCreds are a cell's credentials before its deletion: old is the
// first generation (a prior one, or still current while Distributed), cur
// the second (current, or pending while Distributed).
type cellCreds struct{ old, cur []cred }

// runDeletionMatrix creates the six sets in a namespace of their own,
// brings each to its phase, deletes them all and checks each outcome; then
// runTerminatingCell.
func runDeletionMatrix(t *testing.T, b deletionBackend) {
	ns := newNamespace(t)
	cells := deletionCells()
	sets := map[deletionCell]*v1.CredentialSet{}
	for _, c := range cells {
		cs := b.newSet(t, ns, c.name())
		cs.Spec.DeletionPolicy = c.policy
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
	}
	creds := map[deletionCell]cellCreds{}
	for _, c := range cells {
		cs := waitPhase(t, ns, c.name(), v1.PhaseIdle, 1)
		creds[c] = cellCreds{old: b.creds(t, sourceData(t, cs), "")}
		rotate(t, ns, c.name(), c.name()+"-1")
	}
	for _, c := range cells {
		cs := waitPhase(t, ns, c.name(), v1.PhaseDistributed, 1)
		cc := creds[c]
		cc.cur = b.creds(t, sourceData(t, cs), engine.PendingSuffix)
		creds[c] = cc
		if !c.distributed {
			discard(t, ns, c.name(), c.name()+"-1")
		}
	}
	for _, c := range cells {
		phase, gen := v1.PhaseDistributed, int64(1)
		if !c.distributed {
			phase, gen = v1.PhaseIdle, 2
		}
		sets[c] = waitPhase(t, ns, c.name(), phase, gen)
		assertCreds(t, b, c.name()+" before its deletion", creds[c].cur, true)
		if c.distributed {
			assertCreds(t, b, c.name()+" before its deletion", creds[c].old, true)
		}
	}

	for _, c := range cells {
		if err := k8s.Delete(ctxT(t), sets[c]); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cells {
		cs, cc, name := sets[c], creds[c], c.name()
		if c.distributed && c.policy != v1.DeletionRetain {
			// The rotation completes first: both stay valid meanwhile.
			mustContain(t, "DeletionWaiting", waitEvent(t, ns, name, string(reason.DeletionWaiting)), name+"-1")
			if getSet(t, ns, name).Status.Phase != v1.PhaseDistributed {
				t.Fatalf("%s: a deleted set waiting for its rotation left Distributed on its own", name)
			}
			assertCreds(t, b, name+" deleted, waiting for its rotation", cc.old, true)
			assertCreds(t, b, name+" deleted, waiting for its rotation", cc.cur, true)
			discard(t, ns, name, name+"-1")
		}
		waitSetGoneWithin(t, ns, name, 3*time.Minute)
		src := secretData(t, OperatorNamespace, naming.SourceSecretName(cs))
		when := fmt.Sprintf("%s after its deletion (deletionPolicy %s)", name, c.policy)
		switch c.policy {
		case v1.DeletionRetain:
			waitEvent(t, ns, name, string(reason.Retained))
			assertCreds(t, b, when, cc.cur, true)
			if c.distributed {
				assertCreds(t, b, when+": Retain keeps both", cc.old, true)
			}
			if len(src) == 0 {
				t.Fatalf("%s: Retain must keep the source Secret", when)
			}
			continue
		case v1.DeletionDiscard:
			waitEvent(t, ns, name, string(reason.Released))
			assertCreds(t, b, when, cc.cur, true)
			if len(secretData(t, ns, cs.Spec.Distribution[0].Name)) == 0 {
				t.Fatalf("%s: the distribution Secret must keep what consumers use", when)
			}
		case v1.DeletionDelete:
			waitEvent(t, ns, name, string(reason.Deprovisioned))
			assertCreds(t, b, when, cc.cur, false)
		}
		assertCreds(t, b, when, cc.old, false)
		if len(src) != 0 {
			t.Fatalf("%s: the source Secret keeps %d keys", when, len(src))
		}
	}
	runTerminatingCell(t, b)
}

// runTerminatingCell: a set deleted while Distributed with its namespace
// winds down at once (its consumers go with the namespace), rolled back:
// the old credentials stay valid, the new ones do not, and the source
// Secret is emptied.
func runTerminatingCell(t *testing.T, b deletionBackend) {
	ns := newNamespace(t)
	const name = "termdist"
	cs := b.newSet(t, ns, name)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, name, v1.PhaseIdle, 1)
	old := b.creds(t, sourceData(t, cs), "")
	rotate(t, ns, name, name+"-1")
	cs = waitPhase(t, ns, name, v1.PhaseDistributed, 1)
	cur := b.creds(t, sourceData(t, cs), engine.PendingSuffix)
	assertCreds(t, b, name+" before its deletion", cur, true)
	terminateNamespace(t, ns)
	if err := k8s.Delete(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitSetGoneWithin(t, ns, name, 3*time.Minute)
	when := name + " deleted while Distributed in a terminating namespace"
	assertCreds(t, b, when+": rolled back", old, true)
	assertCreds(t, b, when+": rolled back", cur, false)
	if src := secretData(t, OperatorNamespace, naming.SourceSecretName(cs)); len(src) != 0 {
		t.Fatalf("%s: the source Secret keeps %d keys", when, len(src))
	}
}

// assertCreds: every server accepts each of creds (valid) or none does.
func assertCreds(t testing.TB, b deletionBackend, when string, creds []cred, valid bool) {
	t.Helper()
	if len(creds) == 0 {
		t.Fatalf("%s: no credentials to check", when)
	}
	for _, c := range creds {
		for i, ok := range b.accepts(t, c) {
			if ok != valid {
				t.Fatalf("%s: server %d accepts %s: %v, want %v", when, i, c.user, ok, valid)
			}
		}
	}
}

// userPasswordCreds reads a one-login layout (username, password).
func userPasswordCreds(t testing.TB, data map[string][]byte, suffix string) []cred {
	t.Helper()
	c := cred{string(data["username"+suffix]), string(data["password"+suffix])}
	if c.user == "" || c.secret == "" {
		t.Fatalf("the source Secret holds no username%s/password%s", suffix, suffix)
	}
	return []cred{c}
}

// waitSetGoneWithin: six sets on one server are wound down one at a time
// (the backend lock), each Ceph reconcile several ceph commands: under the
// load of make test the last one took over the minute waitSetGone allows.
// A hang guard, not a speed goal.
func waitSetGoneWithin(t testing.TB, ns, name string, d time.Duration) {
	t.Helper()
	eventually(t, d, name+" deleted", func() (bool, string) {
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
