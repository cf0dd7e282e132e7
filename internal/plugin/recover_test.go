package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// kubectlIn runs the plugin in-process with stdin holding in.
func kubectlIn(t *testing.T, ns, in string, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRootCommand(Options{Out: &out, Err: &errOut, In: strings.NewReader(in)})
	root.SetArgs(append([]string{"--kubeconfig", cp.Kubeconfig, "-n", ns}, args...))
	err = root.ExecuteContext(context.Background())
	return out.String(), err
}

// degraded plays the operator reporting a problem as the Degraded condition.
func degraded(why reason.Reason, msg string) func(*v1.CredentialSetStatus) {
	return func(st *v1.CredentialSetStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: reason.CondDegraded, Status: metav1.ConditionTrue, Reason: string(why), Message: msg})
	}
}

func healthy(st *v1.CredentialSetStatus) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: reason.CondDegraded, Status: metav1.ConditionFalse, Reason: string(reason.Healthy), Message: "no problem seen"})
}

const dualMsg = "orders@% on db-1.example.internal:3307 already has a secondary password, which rekey did not set and cannot tell from its own; the rotation did not start"

func TestRecoverRefusesWhatItDoesNotHandle(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(2))
	mustFail(t, ns, `credentialset "orders" reports no Degraded condition (has the operator reconciled it yet?), so there is nothing kubectl rekey recover handles`, "recover", "orders", "--yes")

	setStatus(t, ns, "orders", healthy)
	mustFail(t, ns, `credentialset "orders" is not degraded (Healthy: no problem seen), so there is nothing kubectl rekey recover handles`, "recover", "orders", "--yes")

	setStatus(t, ns, "orders", degraded(reason.InstanceUnreachable, "instance db-1 is unreachable, so this phase is on hold"))
	mustFail(t, ns, `credentialset "orders" is degraded for a reason kubectl rekey recover does not handle (InstanceUnreachable): instance db-1 is unreachable, so this phase is on hold`, "recover", "orders", "--yes")

	// Lost current secrets while Idle: restoring from backup is the fix.
	lost := "source Secret rekey-system/rekey.x.orders lacks current secrets [ORDERS_PASSWORD]; restore them from backup"
	setStatus(t, ns, "orders", degraded(reason.MissingRotationPending, lost))
	mustFail(t, ns, `credentialset "orders" is degraded (MissingRotationPending) with no rotation active, which kubectl rekey recover does not handle: `+lost, "recover", "orders", "--yes")

	// Discarded already: the operator would refuse (AbortSkipped).
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		distributed("r-3")(st)
		st.DiscardApplied = true
		degraded(reason.MissingRotationPending, "pending lost")(st)
	})
	mustFail(t, ns, `rotation r-3 of credentialset "orders" already discarded the old passwords on every instance, so it cannot be rolled back: it can only complete`, "recover", "orders", "--yes")
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) { st.DiscardApplied, st.DiscardStarted = false, true })
	mustFail(t, ns, `rotation r-3 of credentialset "orders" began discarding the old passwords, so some instances may refuse them already and it cannot be rolled back: it can only complete`, "recover", "orders", "--yes")
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.DiscardStarted = false
		degraded(reason.PendingRejected, "db-1 refuses the new password")(st)
	})
	// What the operator's PendingRejected message advises is what recover
	// does: an active rotation is rolled back.
	out, err := kubectlIn(t, ns, "", "recover", "orders", "--yes")
	if err != nil {
		t.Fatalf("recover refused PendingRejected: %v", err)
	}
	for _, want := range []string{"refuses the pending passwords the source Secret holds for rotation r-3", "The operator rolls rotation r-3 back, as kubectl rekey abort does"} {
		if !strings.Contains(out, want) {
			t.Errorf("recover of PendingRejected printed\n%s\nwant %q", out, want)
		}
	}
	if get(t, ns, "orders").Annotations[engine.RecoverAnnotation] == "" {
		t.Fatal("recover of PendingRejected wrote no request")
	}
	cs := get(t, ns, "orders")
	delete(cs.Annotations, engine.RecoverAnnotation)
	if err := k8s.Update(context.Background(), cs); err != nil {
		t.Fatal(err)
	}

	// A reset under way needs no second one.
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		rolledBack(st)
		st.ConsumersUpdated = "0/1"
		degraded(reason.StaleRotationPending, "stale")(st)
	})
	mustFail(t, ns, `credentialset "orders" is already being reset: the operator resets MySQL to the current passwords once the consumers rolled back (0/1)`, "recover", "orders", "--yes")

	if _, ok := get(t, ns, "orders").Annotations[engine.RecoverAnnotation]; ok {
		t.Fatal("a refused recover wrote the annotation")
	}
	mustFail(t, ns, "recover needs the name of a CredentialSet: kubectl rekey recover NAME", "recover")
	mustFail(t, ns, "--timeout only applies with --wait", "recover", "orders", "--timeout", "1m")
}

func TestRecoverDualPasswordAsksFirst(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(2))
	setStatus(t, ns, "orders", degraded(reason.DualPasswordExists, dualMsg))
	// The refused rotation request stays on the set.
	cs := get(t, ns, "orders")
	cs.Annotations = map[string]string{engine.RotateAnnotation: "r-refused"}
	if err := k8s.Update(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	before := get(t, ns, "orders").ResourceVersion

	want := "Diagnosis for credentialset " + ns + "/orders: a MySQL user has a secondary password that rekey did not set, so rotations are refused (DualPasswordExists).\n" +
		"  The operator reports: " + dualMsg + "\n" +
		"The operator resets MySQL to the current passwords, in this order:\n" +
		"  1. status gets resetPending (Event RecoveryStarted); the consumers restart onto the current passwords: Deployment " + ns + "/orders-api\n" +
		"  2. once every consumer rolled out, every instance is reset to the current passwords (ALTER USER ... IDENTIFIED BY, then ALTER USER ... DISCARD OLD PASSWORD): any other password stops working\n" +
		"  3. the source Secret rekey." + ns + ".orders (in the operator's namespace) drops any pending passwords, resetPending is cleared (Event ResetApplied) and the request annotation removed\n" +
		"Then the refused rotation request r-refused (rekey.io/rotate) starts by itself; remove it first with kubectl annotate credentialset orders rekey.io/rotate- if it should not.\n" +
		"Proceed? [y/N] "
	for _, answer := range []string{"n\n", "\n", "", "yes please\n"} {
		out, err := kubectlIn(t, ns, answer, "recover", "orders")
		if err == nil || err.Error() != "recover was not confirmed, so nothing was written: answer y, or pass --yes to skip the question" {
			t.Fatalf("answer %q: error %v", answer, err)
		}
		if !strings.HasPrefix(out, want) {
			t.Errorf("answer %q: printed\n%s\nwant it to start with\n%s", answer, out, want)
		}
		if after := get(t, ns, "orders").ResourceVersion; after != before {
			t.Fatalf("answer %q wrote the set", answer)
		}
	}

	out, err := kubectlIn(t, ns, "Y\n", "recover", "orders")
	if err != nil {
		t.Fatal(err)
	}
	id := get(t, ns, "orders").Annotations[engine.RecoverAnnotation]
	if u, err := uuid.Parse(id); err != nil || u.Version() != 4 {
		t.Fatalf("%s = %q, want a random UUID", engine.RecoverAnnotation, id)
	}
	if !strings.HasSuffix(out, "Proceed? [y/N] recovery "+id+" requested for credentialset "+ns+"/orders\nfollow it with: kubectl rekey status orders -n "+ns+"\n") {
		t.Errorf("recover printed:\n%s", out)
	}

	// Not served yet: a second recover must not replace it.
	mustFail(t, ns, `credentialset "orders" already has recover request `+id+" that the operator has not served yet", "recover", "orders", "--yes")
}

func TestRecoverStaleRollsBackWithYes(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(2))
	msg := "the source Secret holds pending secrets of another rotation, not r-new: an earlier rotation was interrupted; run kubectl rekey recover"
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.Phase, st.RotationID = v1.PhaseRotating, "r-new"
		degraded(reason.StaleRotationPending, msg)(st)
	})

	out, err := kubectlIn(t, ns, "", "recover", "orders", "--yes")
	if err != nil {
		t.Fatal(err)
	}
	id := get(t, ns, "orders").Annotations[engine.RecoverAnnotation]
	for _, l := range []string{
		"Diagnosis for credentialset " + ns + "/orders: the source Secret holds the pending passwords of another, interrupted rotation, not of the active rotation r-new (StaleRotationPending).",
		"  The operator reports: " + msg,
		"The operator rolls rotation r-new back, as kubectl rekey abort does, in this order:",
		"  1. status returns to Idle with resetPending (Event RotationAborted); until step 4 MySQL accepts the current and the new passwords, so no consumer loses its login",
		"  2. the distribution Secrets get the current passwords again: " + ns + "/orders-db",
		"  3. the consumers restart and roll out onto them: Deployment " + ns + "/orders-api; then the operator waits gracePeriod (the manager's --default-grace-period, 5m unless set otherwise) before step 4, for consumers it cannot watch",
		"recovery " + id + " requested for credentialset " + ns + "/orders",
	} {
		hasLine(t, out, l)
	}
	if strings.Contains(out, "Proceed?") {
		t.Errorf("--yes still asked:\n%s", out)
	}

	// Missing pending passwords are rolled back the same way.
	ns = namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(2))
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		distributed("r-9")(st)
		degraded(reason.MissingRotationPending, "the source Secret does not hold the pending secrets of rotation r-9")(st)
	})
	out, err = kubectlIn(t, ns, "y\n", "recover", "orders")
	if err != nil {
		t.Fatal(err)
	}
	hasLine(t, out, "Diagnosis for credentialset "+ns+"/orders: the source Secret lost pending passwords of the active rotation r-9; MySQL keeps only their hashes, so the rotation cannot go forward (MissingRotationPending).")
	hasLine(t, out, "The operator rolls rotation r-9 back, as kubectl rekey abort does, in this order:")
}

func TestRecoverWaitFollowsReset(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(2))
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.ConsumersUpdated = "1/1"
		degraded(reason.DualPasswordExists, dualMsg)(st)
	})

	ch := kubectlAsync(t, ns, "recover", "orders", "--yes", "--wait", "--timeout", "20s")
	id := requested(t, ns, "orders", engine.RecoverAnnotation)
	settle()
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.ResetPending, st.LastRecoverID = true, id
		healthy(st)
	})
	event(t, get(t, ns, "orders"), "Normal", reason.RecoveryStarted, "recovery "+id+": every instance is reset to the current secrets of the source Secret", time.Now())
	settle()
	// The reset is done, and the refused rotation started right after:
	// --wait must not insist on Idle.
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.ResetPending = false
		st.Phase, st.RotationID = v1.PhaseRotating, "r-refused"
	})
	event(t, get(t, ns, "orders"), "Normal", reason.ResetApplied, "every instance accepts only the current secrets again (generation 2)", time.Now())

	r := await(t, ch)
	t.Logf("recover --wait printed:\n%s", r.out)
	if r.err != nil {
		t.Fatalf("recover --wait: %v\n%s", r.err, r.out)
	}
	for _, want := range []string{
		"recovery " + id + " requested for credentialset " + ns + "/orders\n",
		"waiting up to 20s for recovery " + id + " to finish (MySQL reset to the current passwords, resetPending cleared)\n",
		"phase Idle, generation 2, consumers 1/1 rolled out; Degraded: " + dualMsg + "\n",
		"phase Idle, generation 2, resetPending, consumers 1/1 rolled out\n",
		"event Normal RecoveryStarted: recovery " + id + ": every instance is reset to the current secrets of the source Secret\n",
		"phase Rotating (rotation r-refused), generation 2, consumers 1/1 rolled out\n",
		"recovery " + id + " done: every instance accepts only the current passwords (generation 2)\nnext step: wait: applying new passwords\n",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
}

func TestRecoverWaitFailsOnRefusal(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		distributed("r-1")(st)
		degraded(reason.MissingRotationPending, "pending lost")(st)
	})

	ch := kubectlAsync(t, ns, "recover", "orders", "--yes", "--wait", "--timeout", "20s")
	requested(t, ns, "orders", engine.RecoverAnnotation)
	msg := "rotation r-1 already discarded the old secrets everywhere: it can only complete; remove the recover request and let it finish"
	event(t, get(t, ns, "orders"), "Warning", reason.AbortSkipped, msg, time.Now())

	r := await(t, ch)
	if r.err == nil || r.err.Error() != "the operator refused (AbortSkipped): "+msg {
		t.Fatalf("recover --wait: error %v, want the refusal\n%s", r.err, r.out)
	}
}

func TestRecoverWaitTimesOut(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))
	setStatus(t, ns, "orders", degraded(reason.DualPasswordExists, dualMsg))
	_, err := kubectlIn(t, ns, "", "recover", "orders", "--yes", "--wait", "--timeout", "500ms")
	if err == nil || !strings.Contains(err.Error(), "timed out after 500ms waiting for recovery ") ||
		!strings.Contains(err.Error(), "nothing was undone and the operator goes on") {
		t.Fatalf("recover --wait with nothing happening: %v", err)
	}
}
