package plugin

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// rolledBack plays the operator's first rollback step: Idle with
// resetPending, the rotation's fields cleared, lastRotationID untouched.
func rolledBack(st *v1.CredentialSetStatus) {
	st.Phase, st.RotationID, st.RotateApplied, st.DiscardApplied, st.ResetPending = v1.PhaseIdle, "", false, false, true
	st.RotationStartedAt, st.DistributedAt, st.RolledOutAt = nil, nil, nil
}

func TestAbortWritesActiveRotationID(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(2))
	setStatus(t, ns, "orders", distributed("3b0f6a2e-rot"))

	out, _, err := kubectl(t, ns, "abort", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, ns, "orders").Annotations[engine.AbortAnnotation]; got != "3b0f6a2e-rot" {
		t.Fatalf("%s = %q, want the active rotation 3b0f6a2e-rot", engine.AbortAnnotation, got)
	}
	want := "Aborting rotation 3b0f6a2e-rot of credentialset " + ns + "/orders (phase Distributed). The operator rolls it back in this order:\n" +
		"  1. status returns to Idle with resetPending (Event RotationAborted); until step 4 MySQL accepts the current and the new passwords, so no consumer loses its login\n" +
		"  2. the distribution Secrets get the current passwords again: " + ns + "/orders-db\n" +
		"  3. the consumers restart and roll out onto them: Deployment " + ns + "/orders-api; then the operator waits gracePeriod (the manager's --default-grace-period, 5m unless set otherwise) before step 4, for consumers it cannot watch\n" +
		"  4. once every consumer rolled out, every instance is reset to the current passwords (ALTER USER ... IDENTIFIED BY, then ALTER USER ... DISCARD OLD PASSWORD): any other password stops working\n" +
		"  5. the source Secret rekey." + ns + ".orders (in the operator's namespace) drops any pending passwords, resetPending is cleared (Event ResetApplied) and the request annotation removed\n" +
		"abort of rotation 3b0f6a2e-rot requested for credentialset " + ns + "/orders\n" +
		"follow it with: kubectl rekey status orders -n " + ns + "\n"
	if out != want {
		t.Errorf("abort printed:\n%s\nwant:\n%s", out, want)
	}

	// Asking again writes nothing and says so.
	before := get(t, ns, "orders").ResourceVersion
	out, _, err = kubectl(t, ns, "abort", "orders")
	if err != nil {
		t.Fatal(err)
	}
	hasLine(t, out, "abort of rotation 3b0f6a2e-rot was already requested for credentialset "+ns+"/orders")
	if after := get(t, ns, "orders").ResourceVersion; after != before {
		t.Errorf("a repeated abort wrote the set (%s -> %s)", before, after)
	}
}

func TestAbortRefusesWithoutActiveRotation(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	mustFail(t, ns, `credentialset "orders" has nothing to abort: no rotation is active (phase -)`, "abort", "orders")

	setStatus(t, ns, "orders", idle(1))
	mustFail(t, ns, `credentialset "orders" has nothing to abort: no rotation is active (phase Idle)`, "abort", "orders")
	mustFail(t, ns, "no rotation is active", "abort", "orders", "--wait")

	// Rolled back already: say what is still going on.
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) { st.ResetPending, st.ConsumersUpdated = true, "0/1" })
	mustFail(t, ns, "no rotation is active (phase Idle); a rollback is finishing: the operator resets MySQL to the current passwords once the consumers rolled back (0/1)", "abort", "orders")

	// The old passwords are gone: rolling back would lock consumers out.
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.ResetPending = false
		distributed("r-7")(st)
		st.DiscardApplied = true
	})
	mustFail(t, ns, `rotation r-7 of credentialset "orders" already discarded the old passwords on every instance, so rolling it back would lock consumers out: it can only complete`, "abort", "orders")

	// Discarding began on some instances (one was down, or the operator
	// crashed between them): the same holds.
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) { st.DiscardApplied, st.DiscardStarted = false, true })
	mustFail(t, ns, `rotation r-7 of credentialset "orders" began discarding the old passwords, so some instances may refuse them already and rolling it back would lock consumers out: it can only complete`, "abort", "orders")
	if _, ok := get(t, ns, "orders").Annotations[engine.AbortAnnotation]; ok {
		t.Fatal("a refused abort wrote the annotation")
	}
	mustFail(t, ns, "--timeout only applies with --wait", "abort", "orders", "--timeout", "1m")
	mustFail(t, ns, "abort needs the name of a CredentialSet: kubectl rekey abort NAME", "abort")
}

func TestAbortWaitFollowsRollbackAndReset(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(3))
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		started := metav1.Now()
		st.Phase, st.RotationID, st.RotationStartedAt, st.ConsumersUpdated = v1.PhaseRotating, "r-5", &started, "1/1"
	})
	// A refusal from before the request is history, not an answer to it.
	event(t, get(t, ns, "orders"), "Warning", reason.AbortSkipped, "an old refusal", time.Now())

	ch := kubectlAsync(t, ns, "abort", "orders", "--wait", "--timeout", "20s")
	if id := requested(t, ns, "orders", engine.AbortAnnotation); id != "r-5" {
		t.Fatalf("%s = %q, want r-5", engine.AbortAnnotation, id)
	}
	settle()
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) { rolledBack(st); st.ConsumersUpdated = "0/1" })
	cs := get(t, ns, "orders")
	event(t, cs, "Normal", reason.RotationAborted, "rotation r-5 rolled back on request (kubectl rekey abort)", time.Now())
	// A refusal of the rotation racing the request does not end the wait.
	event(t, cs, "Warning", reason.StaleRotationPending, "a refusal racing the abort", time.Now())
	settle()
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) { st.ConsumersUpdated = "1/1" })
	settle()
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) { st.ResetPending = false })
	event(t, get(t, ns, "orders"), "Normal", reason.ResetApplied, "every instance accepts only the current secrets again (generation 3)", time.Now())

	r := await(t, ch)
	t.Logf("abort --wait printed:\n%s", r.out)
	if r.err != nil {
		t.Fatalf("abort --wait: %v\n%s", r.err, r.out)
	}
	for _, want := range []string{
		"abort of rotation r-5 requested for credentialset " + ns + "/orders\n",
		"waiting up to 20s for rotation r-5 to be rolled back (phase Idle, MySQL reset to the current passwords)\n",
		"phase Rotating (rotation r-5), generation 3, consumers 1/1 rolled out\n",
		"phase Idle, generation 3, resetPending, consumers 0/1 rolled out\n",
		"event Normal RotationAborted: rotation r-5 rolled back on request (kubectl rekey abort)\n",
		"event Warning StaleRotationPending: a refusal racing the abort\n",
		"phase Idle, generation 3, resetPending, consumers 1/1 rolled out\n",
		"phase Idle, generation 3, consumers 1/1 rolled out\n",
		"rotation r-5 rolled back: every instance accepts only the current passwords (generation 3) again\nnext step: rotate when needed\n",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "an old refusal") {
		t.Errorf("an Event from before the request was reported:\n%s", r.out)
	}
}

func TestAbortWaitFailsOnRefusal(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))
	setStatus(t, ns, "orders", distributed("r-1"))

	ch := kubectlAsync(t, ns, "abort", "orders", "--wait", "--timeout", "20s")
	requested(t, ns, "orders", engine.AbortAnnotation)
	msg := "rotation r-1 already discarded the old secrets everywhere, so rolling back would lock consumers out; it can only complete"
	event(t, get(t, ns, "orders"), "Warning", reason.AbortSkipped, msg, time.Now())

	r := await(t, ch)
	if r.err == nil || r.err.Error() != "the operator refused (AbortSkipped): "+msg {
		t.Fatalf("abort --wait: error %v, want the refusal\n%s", r.err, r.out)
	}
}

// A rotate request left on the set restarts the aborted rotation under the
// same ID once the reset is done; --wait must say so, not wait it out.
func TestAbortWaitReportsRestartedRotation(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		started := metav1.NewTime(time.Now().Add(-time.Minute))
		st.Phase, st.RotationID, st.RotationStartedAt = v1.PhaseRotating, "r-2", &started
	})

	ch := kubectlAsync(t, ns, "abort", "orders", "--wait", "--timeout", "20s")
	requested(t, ns, "orders", engine.AbortAnnotation)
	settle()
	// Rollback, reset and restart all in one status write.
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		restarted := metav1.Now()
		st.Phase, st.RotationID, st.RotationStartedAt = v1.PhaseRotating, "r-2", &restarted
	})

	r := await(t, ch)
	if r.err == nil || !strings.Contains(r.err.Error(), "rotation r-2 was rolled back, but the operator started it again (phase Rotating) from its rekey.io/rotate request") {
		t.Fatalf("abort --wait: error %v, want the restart reported\n%s", r.err, r.out)
	}
}

func TestNextStepWhileResetPending(t *testing.T) {
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "orders"},
		Spec:   v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{}, Consumers: []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "api"}}},
		Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3, ResetPending: true, ConsumersUpdated: "0/1"}}
	if got, want := NextStep(cs), "wait: resetting MySQL to the current passwords after the consumers rolled back"; got != want {
		t.Errorf("NextStep = %q, want %q", got, want)
	}
	if got, want := progressLine(cs, time.Now()), "phase Idle, generation 3, resetPending, consumers 0/1 rolled out"; got != want {
		t.Errorf("progressLine = %q, want %q", got, want)
	}
	// A problem during the reset says what to do instead.
	cs.Status.Conditions = []metav1.Condition{{Type: reason.CondDegraded, Status: metav1.ConditionTrue, Reason: "InstanceUnreachable", Message: "instance db-1 is unreachable"}}
	if got := NextStep(cs); got != "instance db-1 is unreachable" {
		t.Errorf("NextStep while degraded = %q", got)
	}
}

func TestStatusShowsResetPending(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(2))
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) { st.ResetPending, st.ConsumersUpdated = true, "0/1" })
	if !get(t, ns, "orders").Status.ResetPending {
		t.Fatal("the API server dropped status.resetPending: the CRD lacks the field")
	}
	out, _, err := kubectl(t, ns, "status", "orders")
	if err != nil {
		t.Fatal(err)
	}
	r := rows(out)
	if len(r) != 2 || r[1][len(r[1])-1] != "wait: resetting MySQL to the current passwords after the consumers rolled back" {
		t.Fatalf("status while resetPending:\n%s", out)
	}
}
