package plugin

import (
	"fmt"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

func TestDiscardUsesActiveRotationID(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(2))
	setStatus(t, ns, "orders", distributed("3b0f6a2e-rot"))

	out, _, err := kubectl(t, ns, "discard", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, ns, "orders").Annotations[engine.DiscardAnnotation]; got != "3b0f6a2e-rot" {
		t.Fatalf("%s = %q, want the active rotation 3b0f6a2e-rot", engine.DiscardAnnotation, got)
	}
	hasLine(t, out, "discard of rotation 3b0f6a2e-rot requested for credentialset "+ns+"/orders")
	hasLine(t, out, "the operator discards the old passwords once every consumer has rolled out (0/1 now)")

	// Asking again is harmless and says so.
	out, _, err = kubectl(t, ns, "discard", "orders")
	if err != nil {
		t.Fatal(err)
	}
	hasLine(t, out, "discard of rotation 3b0f6a2e-rot was already requested for credentialset "+ns+"/orders")
}

func TestDiscardRefusesWithoutDistributedRotation(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	mustFail(t, ns, `credentialset "orders" has no active rotation (phase -), so there is nothing to discard`, "discard", "orders")

	setStatus(t, ns, "orders", idle(1))
	mustFail(t, ns, `credentialset "orders" has no active rotation (phase Idle), so there is nothing to discard: start one with kubectl rekey rotate orders`, "discard", "orders")

	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) { st.Phase, st.RotationID = v1.PhaseRotating, "r-9" })
	mustFail(t, ns, "rotation r-9 of credentialset \"orders\" is still Rotating", "discard", "orders")
	mustFail(t, ns, "wait until Distributed", "discard", "orders")
	if _, ok := get(t, ns, "orders").Annotations[engine.DiscardAnnotation]; ok {
		t.Fatal("a refused discard wrote the annotation")
	}
}

// TestRequestOutlastsStatusWrites: the operator writes a set's status
// several times a second while it moves; a request that finds the set
// changed between its read and its write reads and checks again rather
// than failing the user's command, and gives up with a clear error only if
// the set keeps changing.
func TestRequestOutlastsStatusWrites(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(2))
	setStatus(t, ns, "orders", distributed("r-7"))
	writes := 0
	raceBeforeRequest = func(cs *v1.CredentialSet) {
		if writes < 2 {
			writes++
			setStatus(t, ns, cs.Name, func(st *v1.CredentialSetStatus) { st.ConsumersUpdated = fmt.Sprintf("%d/1", writes%2) })
		}
	}
	t.Cleanup(func() { raceBeforeRequest = nil })
	out, _, err := kubectl(t, ns, "discard", "orders")
	if err != nil {
		t.Fatalf("discard after 2 status writes raced it: %v", err)
	}
	if writes != 2 {
		t.Fatalf("%d status writes raced the request, want 2: the test proves nothing", writes)
	}
	if got := get(t, ns, "orders").Annotations[engine.DiscardAnnotation]; got != "r-7" {
		t.Fatalf("%s = %q, want r-7", engine.DiscardAnnotation, got)
	}
	hasLine(t, out, "discard of rotation r-7 requested for credentialset "+ns+"/orders")

	// A set that changes before every attempt: refused, nothing written.
	setStatus(t, ns, "orders", idle(3))
	raceBeforeRequest = func(cs *v1.CredentialSet) {
		writes++
		setStatus(t, ns, cs.Name, func(st *v1.CredentialSetStatus) { st.ConsumersUpdated = fmt.Sprintf("%d/1", writes%2) })
	}
	mustFail(t, ns, "credentialset "+ns+"/orders kept changing while kubectl rekey checked it", "rotate", "orders")
	if a := get(t, ns, "orders").Annotations[engine.RotateAnnotation]; a != "" {
		t.Fatalf("a rotate that never landed annotated the set: %q", a)
	}
}
