package cli

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// withCondition returns st with the Degraded condition set as the operator
// sets it.
func withCondition(st v1.CredentialSetStatus, degraded bool, reason, msg string) v1.CredentialSetStatus {
	s := metav1.ConditionFalse
	if degraded {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: "Degraded", Status: s, Reason: reason, Message: msg})
	return st
}

// rolledBackAt is the status right after the operator's rollback step:
// Idle, resetPending, the consumers not yet back on the current passwords.
func rolledBackAt(gen int64) v1.CredentialSetStatus {
	st := idleAt(gen)
	st.ResetPending, st.ConsumersUpdated = true, "0/1"
	return st
}

func TestAbortAndRecoverUsage(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kc := in(t, ns)
	unknown := `credentialset "nope" not found in namespace "` + ns + `"`
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"abort"}, "abort needs the name of a CredentialSet: kubectl rekey abort NAME"},
		{[]string{"recover"}, "recover needs the name of a CredentialSet: kubectl rekey recover NAME"},
		{[]string{"abort", "a", "b"}, "abort takes one CredentialSet name, got 2: [a b]"},
		{[]string{"recover", "a", "--timeout", "1m"}, "--timeout only applies with --wait: add --wait"},
		{[]string{"abort", "a", "--yes"}, "unknown flag: --yes"},
		{[]string{"abort", "nope"}, unknown},
		{[]string{"abort", "nope", "--wait"}, unknown},
		{[]string{"recover", "nope", "--yes"}, unknown},
	} {
		if r := kc.fails(t, c.want, c.args...); r.stdout != "" {
			t.Errorf("%v printed on stdout: %q", c.args, r.stdout)
		}
	}
	for _, c := range []struct {
		cmd  string
		want []string
	}{
		{"abort", []string{"kubectl rekey abort NAME [flags]", "rekey.io/abort=<active rotation ID>", "--wait", "--timeout duration", "(default 15m0s)"}},
		{"recover", []string{"kubectl rekey recover NAME [flags]", "rekey.io/recover=<new UUID>", "DualPasswordExists", "StaleRotationPending", "MissingRotationPending", "-y, --yes", "--wait"}},
	} {
		r := noConfig.run(t, c.cmd, "--help")
		if r.code != 0 || r.stderr != "" {
			t.Errorf("%s --help: want exit 0 and nothing on stderr:\n%s", c.cmd, r)
		}
		contains(t, c.cmd+" --help", r.stdout, c.want...)
	}
	r := noConfig.run(t, "--help")
	contains(t, "--help", r.stdout, "  abort ", "  recover ")
}

func TestAbortWritesRotationIDOnlyWhenActive(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	kc := in(t, ns)

	status(t, ns, "orders", idleAt(2))
	kc.fails(t, `credentialset "orders" has nothing to abort: no rotation is active (phase Idle)`, "abort", "orders")
	kc.fails(t, "no rotation is active", "abort", "orders", "--wait")
	if a := getSet(t, ns, "orders").Annotations; len(a) != 0 {
		t.Fatalf("a refused abort annotated the set: %v", a)
	}

	status(t, ns, "orders", distributedAt(2, "7d1e7c9e-5f0b-4c0e-9d59-0a6f8b3a1c11"))
	r := kc.ok(t, "abort", "orders")
	if got := getSet(t, ns, "orders").Annotations["rekey.io/abort"]; got != "7d1e7c9e-5f0b-4c0e-9d59-0a6f8b3a1c11" {
		t.Fatalf("rekey.io/abort=%q, want status.rotationID", got)
	}
	if r.stderr != "" {
		t.Errorf("stderr: %q", r.stderr)
	}
	contains(t, "abort", r.stdout,
		"Aborting rotation 7d1e7c9e-5f0b-4c0e-9d59-0a6f8b3a1c11 of credentialset "+ns+"/orders (phase Distributed). The operator rolls it back in this order:\n"+
			"  1. status returns to Idle with resetPending (Event RotationAborted)",
		"  2. the distribution Secrets get the current passwords again: "+ns+"/orders-db\n",
		"  3. the consumers restart and roll out onto them: Deployment "+ns+"/orders-api; then the operator waits gracePeriod",
		"  4. once every consumer rolled out, every instance is reset to the current passwords (ALTER USER ... IDENTIFIED BY, then ALTER USER ... DISCARD OLD PASSWORD)",
		"(Event ResetApplied)",
		"abort of rotation 7d1e7c9e-5f0b-4c0e-9d59-0a6f8b3a1c11 requested for credentialset "+ns+"/orders\n"+
			"follow it with: kubectl rekey status orders -n "+ns+"\n",
	)
	// The steps come before the request is written.
	if strings.Index(r.stdout, "  5. ") > strings.Index(r.stdout, "requested for credentialset") {
		t.Errorf("the steps were printed after the request:\n%s", r.stdout)
	}

	// Rolled back, MySQL not reset yet: status says what happens next.
	status(t, ns, "orders", rolledBackAt(2))
	r = kc.ok(t, "status", "orders")
	contains(t, "status", r.stdout, "wait: resetting MySQL to the current passwords after the consumers rolled back")
	kc.fails(t, "no rotation is active (phase Idle); a rollback is finishing", "abort", "orders")
}

func TestAbortWaitFollowsRollbackAndReset(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", distributedAt(4, "r-42"))

	run := in(t, ns).start(t, "abort", "orders", "--wait", "--timeout", "30s")
	if id := annotationAppears(t, run, ns, "orders", "rekey.io/abort"); id != "r-42" {
		t.Fatalf("rekey.io/abort=%q, want r-42", id)
	}
	run.printed(t, "phase Distributed (rotation r-42), generation 4, consumers 0/1 rolled out\n")
	status(t, ns, "orders", rolledBackAt(4))
	normal(t, ns, "orders", "RotationAborted", "rotation r-42 rolled back on request (kubectl rekey abort): consumers return to the current secrets, then every instance is reset to them")
	run.printed(t, "phase Idle, generation 4, resetPending, consumers 0/1 rolled out\n")
	st := rolledBackAt(4)
	st.ConsumersUpdated = "1/1"
	status(t, ns, "orders", st)
	run.printed(t, "phase Idle, generation 4, resetPending, consumers 1/1 rolled out\n")
	status(t, ns, "orders", idleAt(4))
	normal(t, ns, "orders", "ResetApplied", "every instance accepts only the current secrets again (generation 4)")

	r := run.finish(t)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("want exit 0 and nothing on stderr:\n%s", r)
	}
	contains(t, "abort --wait", r.stdout,
		"abort of rotation r-42 requested for credentialset "+ns+"/orders\n",
		"waiting up to 30s for rotation r-42 to be rolled back (phase Idle, MySQL reset to the current passwords)\n",
		"event Normal RotationAborted: rotation r-42 rolled back on request (kubectl rekey abort)",
		"phase Idle, generation 4, consumers 1/1 rolled out\n",
		"rotation r-42 rolled back: every instance accepts only the current passwords (generation 4) again\nnext step: rotate when needed\n",
	)
}

func TestAbortWaitFailsOnRefusal(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", distributedAt(1, "r-1"))

	run := in(t, ns).start(t, "abort", "orders", "--wait", "--timeout", "30s")
	annotationAppears(t, run, ns, "orders", "rekey.io/abort")
	msg := "rotation r-1 already discarded the old secrets everywhere, so rolling back would lock consumers out; it can only complete"
	warn(t, ns, "orders", "AbortSkipped", msg)

	r := run.finish(t)
	checkFailure(t, r, "error: the operator refused (AbortSkipped): "+msg+"\n")
	contains(t, "abort --wait", r.stdout, "event Warning AbortSkipped: "+msg+"\n")
}

func TestRecoverRefusesWhenNothingToRecover(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	kc := in(t, ns)

	status(t, ns, "orders", withCondition(idleAt(2), false, "Healthy", "no problem seen"))
	kc.fails(t, `credentialset "orders" is not degraded (Healthy: no problem seen), so there is nothing kubectl rekey recover handles`, "recover", "orders")
	kc.fails(t, "is not degraded", "recover", "orders", "--yes", "--wait")

	msg := "instance db-1.example.internal:3306 is unreachable, so this phase is on hold (nothing is lost; it resumes by itself when the instance answers)"
	status(t, ns, "orders", withCondition(idleAt(2), true, "InstanceUnreachable", msg))
	kc.fails(t, `credentialset "orders" is degraded for a reason kubectl rekey recover does not handle (InstanceUnreachable): `+msg, "recover", "orders", "--yes")
	if a := getSet(t, ns, "orders").Annotations; len(a) != 0 {
		t.Fatalf("a refused recover annotated the set: %v", a)
	}
}

func TestRecoverAsksBeforeWriting(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	msg := "billing@10.% on db-1.example.internal:3306 already has a secondary password, which rekey did not set and cannot tell from its own; the rotation did not start"
	status(t, ns, "orders", withCondition(idleAt(2), true, "DualPasswordExists", msg))
	kc := in(t, ns)
	before := getSet(t, ns, "orders").ResourceVersion

	// "n", or no answer at all (stdin not a terminal): nothing is written.
	for _, answer := range []string{"n\n", ""} {
		r := kc.runWithStdin(t, answer, "recover", "orders")
		checkFailure(t, r, "error: recover was not confirmed, so nothing was written: answer y, or pass --yes to skip the question\n")
		contains(t, "recover answered "+strings.TrimSpace(answer), r.stdout,
			"Diagnosis for credentialset "+ns+"/orders: a MySQL user has a secondary password that rekey did not set, so rotations are refused (DualPasswordExists).\n",
			"  The operator reports: "+msg+"\n",
			"The operator resets MySQL to the current passwords, in this order:\n",
			"  1. status gets resetPending (Event RecoveryStarted)",
			"  2. once every consumer rolled out, every instance is reset to the current passwords (ALTER USER ... IDENTIFIED BY, then ALTER USER ... DISCARD OLD PASSWORD)",
			"\nProceed? [y/N] ",
		)
		if strings.Contains(r.stdout, "requested") {
			t.Errorf("a declined recover says it requested something:\n%s", r.stdout)
		}
		if after := getSet(t, ns, "orders").ResourceVersion; after != before {
			t.Fatalf("answering %q wrote the set (%s -> %s)", answer, before, after)
		}
	}

	// --yes does not ask.
	r := kc.runWithStdin(t, "", "recover", "orders", "--yes")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("want exit 0 and nothing on stderr:\n%s", r)
	}
	id := getSet(t, ns, "orders").Annotations["rekey.io/recover"]
	if u, err := uuid.Parse(id); err != nil || u.Version() != 4 || u.String() != id {
		t.Fatalf("rekey.io/recover=%q is not a canonical random UUID (%v)", id, err)
	}
	if strings.Contains(r.stdout, "Proceed?") {
		t.Errorf("--yes asked anyway:\n%s", r.stdout)
	}
	contains(t, "recover --yes", r.stdout, "recovery "+id+" requested for credentialset "+ns+"/orders\nfollow it with: kubectl rekey status orders -n "+ns+"\n")

	// Unserved, it is not replaced, even when the user says yes.
	r = kc.runWithStdin(t, "y\n", "recover", "orders")
	checkFailure(t, r, `credentialset "orders" already has recover request `+id+" that the operator has not served yet")
	if got := getSet(t, ns, "orders").Annotations["rekey.io/recover"]; got != id {
		t.Fatalf("the pending recover request %s was replaced by %s", id, got)
	}
}

func TestRecoverWaitRollsBackStaleRotation(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	msg := "the source Secret holds pending secrets of another rotation, not r-7: an earlier rotation was interrupted; run kubectl rekey recover"
	st := idleAt(3)
	st.Phase, st.RotationID = v1.PhaseRotating, "r-7"
	status(t, ns, "orders", withCondition(st, true, "StaleRotationPending", msg))

	run := in(t, ns).start(t, "recover", "orders", "--yes", "--wait", "--timeout", "30s")
	id := annotationAppears(t, run, ns, "orders", "rekey.io/recover")
	run.printed(t, "phase Rotating (rotation r-7), generation 3, consumers 1/1 rolled out; Degraded: "+msg+"\n")
	// A refusal of the stale rotation racing the request is not an answer to it.
	warn(t, ns, "orders", "StaleRotationPending", msg)
	st = withCondition(rolledBackAt(3), false, "Healthy", "no problem seen")
	st.LastRecoverID = id
	status(t, ns, "orders", st)
	normal(t, ns, "orders", "RotationAborted", "rotation r-7 rolled back to recover (kubectl rekey recover)")
	run.printed(t, "phase Idle, generation 3, resetPending, consumers 0/1 rolled out\n")
	st.ResetPending, st.ConsumersUpdated = false, "1/1"
	status(t, ns, "orders", st)
	normal(t, ns, "orders", "ResetApplied", "every instance accepts only the current secrets again (generation 3)")

	r := run.finish(t)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("want exit 0 and nothing on stderr:\n%s", r)
	}
	contains(t, "recover --wait", r.stdout,
		"Diagnosis for credentialset "+ns+"/orders: the source Secret holds the pending passwords of another, interrupted rotation, not of the active rotation r-7 (StaleRotationPending).\n",
		"The operator rolls rotation r-7 back, as kubectl rekey abort does, in this order:\n",
		"recovery "+id+" requested for credentialset "+ns+"/orders\n",
		"waiting up to 30s for recovery "+id+" to finish (MySQL reset to the current passwords, resetPending cleared)\n",
		"event Warning StaleRotationPending: "+msg+"\n",
		"event Normal RotationAborted: rotation r-7 rolled back to recover (kubectl rekey recover)\n",
		"phase Idle, generation 3, consumers 1/1 rolled out\n",
		"recovery "+id+" done: every instance accepts only the current passwords (generation 3)\nnext step: rotate when needed\n",
	)
}

func TestRecoverWaitFailsOnRefusal(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", withCondition(distributedAt(2, "r-2"), true, "MissingRotationPending",
		"the source Secret does not hold the pending secrets of rotation r-2, so old secrets cannot be discarded: run kubectl rekey recover"))

	run := in(t, ns).start(t, "recover", "orders", "--yes", "--wait", "--timeout", "30s")
	annotationAppears(t, run, ns, "orders", "rekey.io/recover")
	msg := "rotation r-2 already discarded the old secrets everywhere: it can only complete; remove the recover request and let it finish"
	warn(t, ns, "orders", "AbortSkipped", msg)

	r := run.finish(t)
	checkFailure(t, r, "error: the operator refused (AbortSkipped): "+msg+"\n")
	contains(t, "recover --wait", r.stdout,
		"Diagnosis for credentialset "+ns+"/orders: the source Secret lost pending passwords of the active rotation r-2; MySQL keeps only their hashes, so the rotation cannot go forward (MissingRotationPending).\n",
		"event Warning AbortSkipped: "+msg+"\n")
}

// Ctrl-C at the question ends the command at once, writing nothing.
func TestRecoverInterruptedAtQuestion(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", withCondition(idleAt(2), true, "DualPasswordExists", "orders@% already has a secondary password"))

	// A terminal that never answers: stdin stays open.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinW.Close()
	cmd := exec.Command(bin, "recover", "orders")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "KUBECONFIG=" + kubeconfigFor(t, ns)}
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdinR.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	r := &running{cmd: cmd, args: cmd.Args[1:], stdout: stdout, stderr: stderr}
	r.printed(t, "Proceed? [y/N] ")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("recover did not end on Ctrl-C at the question")
	}
	res := result{args: r.args, code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	checkNoLeak(t, res)
	checkFailure(t, res, "error: interrupted before an answer, so nothing was written\n")
	if a := getSet(t, ns, "orders").Annotations; len(a) != 0 {
		t.Fatalf("an interrupted recover annotated the set: %v", a)
	}
}
