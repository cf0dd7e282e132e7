package cli

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestDiscardUsesStatusRotationID(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	// The ID discard writes is the operator's status.rotationID.
	status(t, ns, "orders", distributedAt(5, "7d1e7c9e-5f0b-4c0e-9d59-0a6f8b3a1c11"))
	kc := in(t, ns)

	r := kc.ok(t, "discard", "orders")
	if got := getSet(t, ns, "orders").Annotations["rekey.io/discard"]; got != "7d1e7c9e-5f0b-4c0e-9d59-0a6f8b3a1c11" {
		t.Fatalf("rekey.io/discard=%q, want status.rotationID", got)
	}
	want := "discard of rotation 7d1e7c9e-5f0b-4c0e-9d59-0a6f8b3a1c11 requested for credentialset " + ns + "/orders\n" +
		"the operator discards the old passwords once every consumer has rolled out (0/1 now)\n" +
		"follow it with: kubectl rekey status orders -n " + ns + "\n"
	if r.stdout != want || r.stderr != "" {
		t.Errorf("stdout %q, stderr %q; want stdout %q", r.stdout, r.stderr, want)
	}

	// Asking again writes nothing and says so.
	before := getSet(t, ns, "orders").ResourceVersion
	r = kc.ok(t, "discard", "orders")
	contains(t, "second discard", r.stdout, "discard of rotation 7d1e7c9e-5f0b-4c0e-9d59-0a6f8b3a1c11 was already requested for credentialset "+ns+"/orders\n")
	if after := getSet(t, ns, "orders").ResourceVersion; after != before {
		t.Errorf("a repeated discard wrote the set (%s -> %s)", before, after)
	}

	// Rolled out: no waiting line.
	st := distributedAt(5, "7d1e7c9e-5f0b-4c0e-9d59-0a6f8b3a1c11")
	now := metav1.Now()
	st.RolledOutAt, st.ConsumersUpdated = &now, "1/1"
	status(t, ns, "orders", st)
	r = kc.ok(t, "discard", "orders")
	contains(t, "discard after rollout", r.stdout, "was already requested")
	if strings.Count(r.stdout, "\n") != 2 {
		t.Errorf("after rollout, discard printed more than the request and the hint:\n%s", r.stdout)
	}
}

func TestDiscardRefusesUnlessDistributed(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	kc := in(t, ns)

	kc.fails(t, `credentialset "orders" has no active rotation (phase -), so there is nothing to discard: start one with kubectl rekey rotate orders`, "discard", "orders")
	status(t, ns, "orders", idleAt(2))
	kc.fails(t, `credentialset "orders" has no active rotation (phase Idle), so there is nothing to discard: start one with kubectl rekey rotate orders`, "discard", "orders")
	kc.fails(t, "phase Idle", "discard", "orders", "--wait")
	status(t, ns, "orders", v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r-9", KeyGeneration: 2})
	kc.fails(t, `rotation r-9 of credentialset "orders" is still Rotating (new passwords are being applied), so the old ones cannot be discarded yet: wait until Distributed`, "discard", "orders")
	if a := getSet(t, ns, "orders").Annotations; len(a) != 0 {
		t.Fatalf("a refused discard annotated the set: %v", a)
	}
}
