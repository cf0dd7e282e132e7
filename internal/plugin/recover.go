package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

func newRecoverCommand(a *app) *cobra.Command {
	var (
		w   waitFlags
		yes bool
	)
	cmd := &cobra.Command{
		Use:   "recover NAME",
		Short: "Repair a set stuck on a documented failure, through the operator",
		Long: `recover reads the set's Degraded condition and handles ` + countWord(len(sharedRepairs)+len(backendRepairs())) + ` documented
failures:
` + repairRows() + `  KeyMismatch             an identity's secret was changed outside rekey: the
                          backend is reset to the source Secret's current ones
  StaleRotationPending    the source Secret holds another rotation's pending
                          secrets: the active rotation is rolled back (as abort)
  MissingRotationPending  the active rotation's pending secrets were lost:
                          the rotation is rolled back (as abort)
  PendingRejected         the backend refuses the secrets the source Secret
                          holds: an active rotation is rolled back (as abort);
                          an idle set's backend is reset to the source Secret
A rotation that began discarding the old secrets can only complete: recover
refuses it, as the operator would.
It prints the diagnosis and the steps, asks for confirmation (unless --yes),
then annotates the set with rekey.io/recover=<new UUID>, as kubectl annotate
could. The operator does the work; nothing connects to the backend from here.
` + backendHelp(func(h registry.Help) string { return h.Recover }) + `Anything else is not something recover handles: it says so and changes nothing.`,
		Example: `  kubectl rekey recover moco -n shop
  kubectl rekey recover moco -n shop --yes --wait`,
		Args: nameArg("recover"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(cmd); err != nil {
				return err
			}
			s, err := a.session()
			if err != nil {
				return err
			}
			return s.recover(cmd.Context(), args[0], yes, w)
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "proceed without asking for confirmation")
	w.bind(cmd, "the backend is reset to the current credentials (resetPending cleared)")
	return cmd
}

func (s *session) recover(ctx context.Context, name string, yes bool, w waitFlags) error {
	cs, err := s.getSet(ctx, name)
	if err != nil {
		return err
	}
	st := cs.Status
	if req := cs.Annotations[engine.RecoverAnnotation]; req != "" && req != st.LastRecoverID {
		return fmt.Errorf("credentialset %q already has recover request %s that the operator has not served yet (is it running?): follow it with kubectl rekey status %s",
			cs.Name, req, cs.Name)
	}
	if st.ResetPending {
		return fmt.Errorf("credentialset %q is already being reset: the operator resets %s to the current %s once the consumers rolled back (%s) and gracePeriod passed (now: %s); follow it with kubectl rekey status %s",
			cs.Name, backendName(cs), secretWord(cs), consumerCount(cs), nextStep(cs, s.opts.Now()), cs.Name)
	}
	id := uuid.NewString()
	d, err := diagnose(cs, id)
	if err != nil {
		return err
	}
	out := s.opts.Out
	fmt.Fprintf(out, "Diagnosis for credentialset %s: %s.\n  The operator reports: %s\n", setRef(cs), d.cause, d.message)
	fmt.Fprintln(out, d.intro)
	printSteps(out, d.steps)
	if d.then != "" {
		fmt.Fprintln(out, d.then)
	}
	if !yes {
		ok, err := s.confirm(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("recover was not confirmed, so nothing was written: answer y, or pass --yes to skip the question")
		}
	}
	evs, err := s.listEvents(ctx, name)
	if err != nil {
		return err
	}
	seen := newBaseline(eventsAbout(evs, cs))
	err = s.request(func() error {
		err := s.annotate(ctx, cs, engine.RecoverAnnotation, id)
		var changed *errChanged
		if !errors.As(err, &changed) {
			return err
		}
		// What was confirmed still holds if the set, read again, gets the
		// same diagnosis: then the request goes ahead on the fresh read.
		fresh, ferr := s.getSet(ctx, name)
		if ferr != nil {
			return ferr
		}
		if again, derr := diagnose(fresh, id); derr != nil || again.cause != d.cause || !slices.Equal(again.steps, d.steps) {
			return fmt.Errorf("credentialset %s changed after the diagnosis above, so nothing was written: run kubectl rekey recover %s again", setRef(cs), cs.Name)
		}
		cs = fresh
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "recovery %s requested for credentialset %s\n", id, setRef(cs))
	if !w.wait {
		fmt.Fprintf(out, "follow it with: kubectl rekey status %s -n %s\n", name, s.ns)
		return nil
	}
	// The operator records the request in lastRecoverID together with
	// resetPending, so both together mean the reset is done, whatever the
	// phase (a refused rotation request may have started right after).
	g := goal{
		what:  fmt.Sprintf("recovery %s to finish (%s reset to the current %s, resetPending cleared)", id, backendName(cs), secretWord(cs)),
		fatal: rollbackRefusals,
		done: func(cs *v1.CredentialSet) bool {
			return cs.Status.LastRecoverID == id && !cs.Status.ResetPending
		},
	}
	cs, err = s.follow(ctx, name, seen, g, w.timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "recovery %s done: %s (generation %d)\nnext step: %s\n", id, termsFor(cs).ResetDone, cs.Status.KeyGeneration, NextStep(cs))
	return nil
}

// sharedRepairs are the failures recover handles on any backend; a
// backend adds its own (registry.Repair).
var sharedRepairs = []reason.Reason{reason.KeyMismatch, reason.StaleRotationPending, reason.MissingRotationPending, reason.PendingRejected}

// repairRows are the backends' own failures in recover's help, as rows
// of its failures table.
func repairRows() string {
	var b strings.Builder
	for _, rp := range registry.Repairs() {
		for i, line := range strings.Split(rp.Help, "\n") {
			name := ""
			if i == 0 {
				name = string(rp.Reason)
			}
			fmt.Fprintf(&b, "  %-24s%s\n", name, line)
		}
	}
	return b.String()
}

// backendRepairs are the reasons the backends' own repairs cover, each
// once (two backends may repair the same failure, each in its words).
func backendRepairs() []reason.Reason {
	var out []reason.Reason
	for _, rp := range registry.Repairs() {
		if !slices.Contains(out, rp.Reason) {
			out = append(out, rp.Reason)
		}
	}
	return out
}

// countWord is n in words, as help text reads it.
func countWord(n int) string {
	words := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}
	if n < len(words) {
		return words[n]
	}
	return fmt.Sprint(n)
}

// diagnosis is what recover found and what the operator will do about it.
type diagnosis struct {
	cause, message string   // in words, and the operator's own condition message
	intro          string   // the line before the steps
	steps          []string // what the operator carries out, in order
	then           string   // what follows, if anything
}

// diagnose maps the Degraded condition to one of the documented failures,
// or says why recover does not apply. What the operator does is the
// engine's decision on recover request id: an active rotation is rolled
// back unless it can only complete, an idle set has its backend reset.
func diagnose(cs *v1.CredentialSet, id string) (diagnosis, error) {
	st := cs.Status
	c := meta.FindStatusCondition(st.Conditions, reason.CondDegraded)
	if c == nil {
		return diagnosis{}, fmt.Errorf("credentialset %q reports no Degraded condition (has the operator reconciled it yet?), so there is nothing kubectl rekey recover handles: check kubectl rekey status %s",
			cs.Name, cs.Name)
	}
	if c.Status != metav1.ConditionTrue {
		return diagnosis{}, fmt.Errorf("credentialset %q is not degraded (%s: %s), so there is nothing kubectl rekey recover handles", cs.Name, c.Reason, c.Message)
	}
	d := diagnosis{message: c.Message}
	r := reason.Reason(c.Reason)
	rp, backendOwn := registry.RepairOf(cs, r)
	switch {
	case backendOwn:
		d.cause = fmt.Sprintf("%s (%s)", rp.Cause, rp.Reason)
	case r == reason.KeyMismatch:
		d.cause = "a backend identity no longer accepts the secret the source Secret holds for it: it was changed outside rekey, so rotations are refused (KeyMismatch)"
	case r == reason.StaleRotationPending:
		d.cause = fmt.Sprintf("the source Secret holds the pending %s of another, interrupted rotation, not of the active rotation %s (StaleRotationPending)", secretWord(cs), st.RotationID)
	case r == reason.MissingRotationPending:
		d.cause = fmt.Sprintf("the source Secret lost pending %s of the active rotation %s%s, so the rotation cannot go forward (MissingRotationPending)", secretWord(cs), st.RotationID, hashesOnly(cs))
	case r == reason.PendingRejected:
		if engine.Active(st) {
			d.cause = fmt.Sprintf("%s refuses the pending %s the source Secret holds for rotation %s (edited by hand, or changed in the backend), so the rotation cannot go forward (PendingRejected)", backendName(cs), secretWord(cs), st.RotationID)
		} else {
			d.cause = fmt.Sprintf("%s refuses the current %s the source Secret holds, so the distribution Secrets are left as they are (PendingRejected). If the source Secret was edited by hand, do not go on: restore it from backup instead, since the reset below would make %s accept only what it holds now", backendName(cs), secretWord(cs), backendName(cs))
		}
	default:
		return diagnosis{}, fmt.Errorf("credentialset %q is degraded for a reason kubectl rekey recover does not handle (%s): %s", cs.Name, c.Reason, c.Message)
	}
	irreversible := engine.AppliedInPlace(st, traits(cs))
	switch dec := engine.Decide(engine.Input{Status: st, RecoverRequest: id, Irreversible: irreversible}); dec.Action {
	case engine.Rollback:
		d.intro = fmt.Sprintf("The operator rolls rotation %s back, as kubectl rekey abort does, in this order:", st.RotationID)
		d.steps = rollbackSteps(cs)
		return d, nil
	case engine.Recover:
		return resetDiagnosis(cs, c, d)
	default:
		co := engine.CommitmentOf(st, irreversible)
		if dec.Action != engine.Refuse || co == engine.Reversible {
			return diagnosis{}, fmt.Errorf("credentialset %q: the operator would not act on a recover request: %s", cs.Name, dec.Message)
		}
		then := ""
		if co == engine.Retiring {
			then = ". The operator finishes the discard by itself once it can"
		}
		return diagnosis{}, fmt.Errorf("rotation %s of credentialset %q %s it cannot be rolled back: it can only complete%s (%s: %s)",
			st.RotationID, cs.Name, committedWhy(cs, co), then, c.Reason, c.Message)
	}
}

// resetDiagnosis is recover on an idle set: the backend is reset to the
// current secrets, which cures only the failures of those secrets.
func resetDiagnosis(cs *v1.CredentialSet, c *metav1.Condition, d diagnosis) (diagnosis, error) {
	st := cs.Status
	r := reason.Reason(c.Reason)
	_, backendOwn := registry.RepairOf(cs, r)
	switch {
	case !backendOwn && r != reason.KeyMismatch && r != reason.PendingRejected:
		// Missing current secrets or a missing source Secret (restore from
		// backup) while Idle: a reset would have nothing to reset to.
		return diagnosis{}, fmt.Errorf("credentialset %q is degraded (%s) with no rotation active, which kubectl rekey recover does not handle: %s", cs.Name, c.Reason, c.Message)
	case traits(cs).ReadBack && !backendOwn:
		// A backend that mints its secrets (Ceph) only checks them on a
		// reset (it cannot set one), so a recovery would stay
		// resetPending; the operator's message names the fix: have rekey
		// adopt the backend's secret.
		return diagnosis{}, fmt.Errorf("credentialset %q is degraded (%s), which kubectl rekey recover cannot repair for %s: %s mints its %s, so rekey cannot reset one to the source Secret's. Do what the operator says: %s",
			cs.Name, c.Reason, backendName(cs), backendName(cs), secretWord(cs), c.Message)
	}
	d.intro = fmt.Sprintf("The operator resets %s to the current %s, in this order:", backendName(cs), secretWord(cs))
	d.steps = append([]string{"status gets resetPending (Event RecoveryStarted); the consumers restart onto the current " + secretWord(cs) + ": " + consumerList(cs)}, resetSteps(cs)...)
	if req := cs.Annotations[engine.RotateAnnotation]; req != "" && req != st.LastRotationID {
		d.then = fmt.Sprintf("Then the refused rotation request %s (rekey.io/rotate) starts by itself; remove it first with kubectl annotate credentialset %s %s- if it should not.",
			req, cs.Name, engine.RotateAnnotation)
	}
	return d, nil
}

// confirm asks on Out and reads one line from In; only y or yes proceeds.
// The read happens aside so that Ctrl-C (which cancels ctx) still ends the
// command while it waits for an answer.
func (s *session) confirm(ctx context.Context) (bool, error) {
	fmt.Fprint(s.opts.Out, "Proceed? [y/N] ")
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(s.opts.In).ReadString('\n')
		ch <- answer{line, err}
	}()
	var a answer
	select {
	case <-ctx.Done():
		fmt.Fprintln(s.opts.Out)
		return false, errors.New("interrupted before an answer, so nothing was written")
	case a = <-ch:
	}
	if a.err != nil && !errors.Is(a.err, io.EOF) {
		return false, fmt.Errorf("read the answer: %w", a.err)
	}
	if !strings.HasSuffix(a.line, "\n") {
		fmt.Fprintln(s.opts.Out) // no answer typed: end the prompt line
	}
	switch strings.ToLower(strings.TrimSpace(a.line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// hashesOnly says why lost pending secrets stop a rotation: a backend that
// keeps only hashes cannot hand them back. One that mints its secrets
// (ReadBack) could, so the clause would be wrong for it.
func hashesOnly(cs *v1.CredentialSet) string {
	if traits(cs).ReadBack {
		return ""
	}
	return "; " + backendName(cs) + " keeps only their hashes"
}
