package cli

import (
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// The binary follows a watch of the set and its Events (TestWaitWatches
// proves it sees every change); the --wait tests run in parallel.

func TestRotateWaitReachesDistributed(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", idleAt(1))
	// A refusal from before the request is history, not an answer to it.
	warn(t, ns, "orders", "DualPasswordExists", "an earlier refusal")

	run := in(t, ns).start(t, "rotate", "orders", "--wait", "--timeout", "30s")
	id := annotationAppears(t, run, ns, "orders", "rekey.io/rotate")
	// The set as the request left it, read before the operator moves it.
	run.printed(t, "phase Idle, generation 1, consumers 1/1 rolled out\n")
	st := idleAt(1)
	st.Phase, st.RotationID = v1.PhaseRotating, id
	status(t, ns, "orders", st)
	// InstanceUnreachable only holds the phase: --wait reports it and goes on.
	warn(t, ns, "orders", "InstanceUnreachable", "instance db-1.example.internal:3306 is unreachable, so this phase is on hold")
	run.printed(t, "phase Rotating (rotation "+id+"), generation 1, consumers 1/1 rolled out\n")
	status(t, ns, "orders", distributedAt(1, id))

	r := run.finish(t)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("want exit 0 and nothing on stderr:\n%s", r)
	}
	contains(t, "rotate --wait", r.stdout,
		"rotation "+id+" requested for credentialset "+ns+"/orders\n",
		"waiting up to 30s for rotation "+id+" to reach Distributed\n",
		"phase Idle, generation 1, consumers 1/1 rolled out\n",
		"phase Rotating (rotation "+id+"), generation 1, consumers 1/1 rolled out\n",
		"event Warning InstanceUnreachable: instance db-1.example.internal:3306 is unreachable, so this phase is on hold\n",
		"phase Distributed (rotation "+id+"), generation 1, consumers 0/1 rolled out\n",
		"rotation "+id+" distributed: old and new passwords both work until discard\nnext step: wait for consumers to roll out (0/1)\n",
	)
	if strings.Contains(r.stdout, "an earlier refusal") {
		t.Errorf("an Event from before the request was reported:\n%s", r.stdout)
	}
}

func TestRotateWaitFailsOnRefusal(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", idleAt(1))

	run := in(t, ns).start(t, "rotate", "orders", "--wait", "--timeout", "30s")
	annotationAppears(t, run, ns, "orders", "rekey.io/rotate")
	msg := "user billing@10.% already has a secondary password rekey did not set: reset it, then rotate again"
	warn(t, ns, "orders", "DualPasswordExists", msg)

	r := run.finish(t)
	checkFailure(t, r, "error: the operator refused (DualPasswordExists): "+msg+"\n")
	contains(t, "rotate --wait", r.stdout, "event Warning DualPasswordExists: "+msg+"\n")
}

func TestDiscardWaitReachesIdle(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", distributedAt(4, "r-42"))

	run := in(t, ns).start(t, "discard", "orders", "--wait", "--timeout", "30s")
	if id := annotationAppears(t, run, ns, "orders", "rekey.io/discard"); id != "r-42" {
		t.Fatalf("rekey.io/discard=%q, want r-42", id)
	}
	st := distributedAt(4, "r-42")
	now := metav1.Now()
	st.ConsumersUpdated, st.RolledOutAt = "1/1", &now
	status(t, ns, "orders", st)
	run.printed(t, "phase Distributed (rotation r-42), generation 4, consumers 1/1 rolled out\n")
	st = idleAt(5)
	st.LastRotationID = "r-42"
	status(t, ns, "orders", st)

	r := run.finish(t)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("want exit 0 and nothing on stderr:\n%s", r)
	}
	contains(t, "discard --wait", r.stdout,
		"discard of rotation r-42 requested for credentialset "+ns+"/orders\n",
		"waiting up to 30s for rotation r-42 to complete (phase Idle, generation 5)\n",
		"phase Distributed (rotation r-42), generation 4, consumers 1/1 rolled out\n",
		"phase Idle, generation 5, consumers 1/1 rolled out\n",
		"rotation r-42 complete: generation 5 is current, the old passwords no longer work\n",
	)
}

func TestDiscardWaitFailsOnRefusal(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", distributedAt(1, "r-1"))

	run := in(t, ns).start(t, "discard", "orders", "--wait", "--timeout", "30s")
	annotationAppears(t, run, ns, "orders", "rekey.io/discard")
	msg := "no running instances (replicas: 0): scale the cluster up and discard proceeds"
	warn(t, ns, "orders", "DiscardRefused", msg)

	r := run.finish(t)
	checkFailure(t, r, "error: the operator refused (DiscardRefused): "+msg+"\n")
}

func TestWaitTimesOutAndStopsOnInterrupt(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", idleAt(1))
	kc := in(t, ns)

	r := kc.run(t, "rotate", "orders", "--wait", "--timeout", "1s")
	checkFailure(t, r, "timed out after 1s waiting for rotation ")
	contains(t, "timeout", r.stderr, "(last seen: phase Idle, generation 1, consumers 1/1 rolled out); nothing was undone and the operator goes on: follow it with kubectl rekey status orders -n "+ns+"\n")

	// Ctrl-C ends the wait with a clear message; the request stays.
	status(t, ns, "orders", distributedAt(1, "r-int"))
	run := kc.start(t, "discard", "orders", "--wait")
	annotationAppears(t, run, ns, "orders", "rekey.io/discard")
	run.printed(t, "phase Distributed (rotation r-int)")
	if err := run.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r = run.finish(t)
	checkFailure(t, r, "stopped waiting for rotation r-int to complete (phase Idle, generation 2) (last seen: phase Distributed (rotation r-int), generation 1, consumers 0/1 rolled out); the operator goes on")
	if getSet(t, ns, "orders").Annotations["rekey.io/discard"] != "r-int" {
		t.Error("the discard request did not survive the interrupt")
	}
}
