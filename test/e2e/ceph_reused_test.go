package e2e

import (
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// TestCephInPlaceRotationIDTakenAgain: an InPlace rotation r1 runs on a
// real mon, and the consumer pods (which read their Secret at start)
// restart onto its key; then the set's status and source Secret are
// restored from a backup taken before it, which forgets that r1 was used.
// r1 is asked for again: refused, as the mon refuses the key the source
// Secret holds (PendingRejected), naming the entity's deletion from the
// source Secret. Once deleted, rekey reads the key back and the second r1 runs in
// place, which kills the key the pods hold: the pods must restart onto
// its new key, under a restart value their template has not carried, and
// no pod login is refused once r1 completes. Before, the second r1 set
// the restart value "r1" again, which the template carried while its pods
// ran the first r1: a Deployment whose template returns to a value its
// pods run restarts none of them, and they held a key the mon no longer
// accepted (the explorer's InPlace random walks, seed 5, found it). Here
// the read back's own restart came between, so the pods happened to
// restart; the test fails on the value taken again.
func TestCephInPlaceRotationIDTakenAgain(t *testing.T) {
	const name, entity = "again", "client.again"
	c, ns, pc := cephSetWithPods(t, name, entity, v1.CephInPlace, v1.DiscardManual)
	cs := getSet(t, ns, name)
	backupStatus, backupSource := *cs.Status.DeepCopy(), maps.Clone(sourceData(t, cs))

	rotate(t, ns, name, "r1")
	waitRolledOut(t, ns, name)
	first := restartValueOf(t, pc, name)
	restoreSet(t, ns, name, backupStatus, backupSource)
	observed(t, "status and source Secret restored from before r1, whose key the pods run (restart value %q)", first)
	assertNoRefusalsSince(t, pc)

	rotate(t, ns, name, "r1")
	waitEventNoting(t, ns, name, reason.PendingRejected, "otherwise delete "+entity+" from the source Secret")
	editSource(t, getSet(t, ns, name), func(data map[string][]byte) { delete(data, entity) })
	waitRolledOut(t, ns, name)
	if again := restartValueOf(t, pc, name); again == first {
		t.Fatalf("the second r1 restarted the consumers under %q, the first's, which their template already carried", again)
	}
	discard(t, ns, name, "r1")
	waitFor(t, 3*time.Minute, "the second r1 discarded", func() (bool, string) {
		cs := getSet(t, ns, name)
		st := cs.Status
		return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle, stateOf(cs)
	})
	waitServed(t, c, ns, name, entity)
	assertNoRefusalsSince(t, pc)
}

// restartValueOf is the restart value of set name the consumers' pod
// template carries.
func restartValueOf(t *testing.T, pc *podConsumers, name string) string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: pc.ns, Name: pc.name}, d); err != nil {
		t.Fatal(err)
	}
	cs := getSet(t, pc.ns, name)
	return d.Spec.Template.Annotations[naming.RestartAnnotation(cs)]
}
