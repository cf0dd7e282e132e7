package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

func newAbortCommand(a *app) *cobra.Command {
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "abort NAME",
		Short: "Roll an active rotation back: consumers return to the current credentials",
		Long: `abort annotates the CredentialSet with rekey.io/abort=<active rotation ID>,
as kubectl annotate could. The operator rolls the rotation back in an order
that keeps every consumer logged in: status returns to Idle (with
resetPending), consumers get the current credentials again and roll out, and
only then is the backend reset to them:
` + backendHelp(func(h registry.Help) string { return h.Abort }) + `The set must be Rotating or Distributed, and the old credentials must not
have been retired yet.`,
		Example: `  kubectl rekey abort moco -n shop --wait`,
		Args:    nameArg("abort"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(cmd); err != nil {
				return err
			}
			s, err := a.session()
			if err != nil {
				return err
			}
			return s.abort(cmd.Context(), args[0], w)
		},
	}
	w.bind(cmd, "the rotation is rolled back and the backend reset (phase Idle, resetPending cleared)")
	return cmd
}

// rollbackRefusals end a --wait of abort or recover: the operator will not
// roll back (the old passwords were discarded already). Refusals of the
// rotation itself (StaleRotationPending, ...) are what a rollback cures, so
// one racing the request must not end the wait.
var rollbackRefusals = []reason.Reason{reason.AbortSkipped}

func (s *session) abort(ctx context.Context, name string, w waitFlags) error {
	r, err := s.requestRotationStep(ctx, name, abortable, engine.AbortAnnotation)
	if err != nil {
		return err
	}
	cs, id, seen, already := r.cs, r.id, r.seen, r.already
	gen, started := cs.Status.KeyGeneration, cs.Status.RotationStartedAt
	if already {
		fmt.Fprintf(s.opts.Out, "abort of rotation %s was already requested for credentialset %s\n", id, setRef(cs))
	} else {
		// The steps as the set was when the request landed.
		fmt.Fprintf(s.opts.Out, "Aborting rotation %s of credentialset %s (phase %s). The operator rolls it back in this order:\n", id, setRef(cs), cs.Status.Phase)
		printSteps(s.opts.Out, rollbackSteps(cs))
		fmt.Fprintf(s.opts.Out, "abort of rotation %s requested for credentialset %s\n", id, setRef(cs))
	}
	if !w.wait {
		fmt.Fprintf(s.opts.Out, "follow it with: kubectl rekey status %s -n %s\n", name, s.ns)
		return nil
	}
	// The rotation is rolled back once it is no longer active and the reset
	// is done. A rotation active again under the same ID after that is a
	// restart (a new start time), not the one aborted.
	rolledBack := false
	g := goal{
		what:  fmt.Sprintf("rotation %s to be rolled back (phase Idle, %s reset to the current %s)", id, backendName(cs), secretWord(cs)),
		fatal: rollbackRefusals,
		done: func(cs *v1.CredentialSet) bool {
			st := cs.Status
			if st.ResetPending || !activeRotation(st, id) || !st.RotationStartedAt.Equal(started) {
				rolledBack = true
			}
			return rolledBack && !st.ResetPending
		},
	}
	cs, err = s.follow(ctx, name, seen, g, w.timeout)
	if err != nil {
		return err
	}
	st := cs.Status
	switch {
	case st.LastRotationID == id || st.KeyGeneration > gen:
		return fmt.Errorf("rotation %s completed (generation %d) before the abort took effect: its new %s are current and %s; nothing was rolled back", id, st.KeyGeneration, secretWord(cs), termsFor(cs).Retired)
	case activeRotation(st, id):
		return fmt.Errorf("rotation %s was rolled back, but the operator started it again (phase %s) from its rekey.io/rotate request, which was still on the set: remove it with kubectl annotate credentialset %s %s-, then kubectl rekey abort %s again",
			id, st.Phase, name, engine.RotateAnnotation, name)
	}
	fmt.Fprintf(s.opts.Out, "rotation %s rolled back: %s (generation %d) again\nnext step: %s\n", id, termsFor(cs).ResetDone, st.KeyGeneration, NextStep(cs))
	return nil
}

// abortable returns the rotation to abort, or why there is none. Whether
// the operator rolls it back is the engine's decision on an abort request
// for it; only the words are the plugin's.
func abortable(cs *v1.CredentialSet) (string, error) {
	st := cs.Status
	if !engine.Active(st) {
		msg := fmt.Sprintf("credentialset %q has nothing to abort: no rotation is active (phase %s)", cs.Name, orDash(string(st.Phase)))
		if st.ResetPending {
			return "", fmt.Errorf("%s; a rollback is finishing: the operator resets %s to the current %s once the consumers rolled back (%s) and gracePeriod passed (now: %s): follow it with kubectl rekey status %s",
				msg, backendName(cs), secretWord(cs), consumerCount(cs), NextStep(cs), cs.Name)
		}
		return "", fmt.Errorf("%s", msg)
	}
	irreversible := engine.AppliedInPlace(st, traits(cs))
	d := engine.Decide(engine.Input{Status: st, AbortRequest: st.RotationID, Irreversible: irreversible})
	if d.Action == engine.Rollback {
		return st.RotationID, nil
	}
	c := engine.CommitmentOf(st, irreversible)
	if d.Action != engine.Refuse || c == engine.Reversible {
		// A refusal this plugin has no words for: the operator's own.
		return "", fmt.Errorf("credentialset %q: %s", cs.Name, d.Message)
	}
	then := ""
	if c == engine.Retiring {
		then = ", which the operator does by itself"
	}
	return "", fmt.Errorf("rotation %s of credentialset %q %s rolling it back would lock consumers out: it can only complete%s (kubectl rekey status %s)",
		st.RotationID, cs.Name, committedWhy(cs, c), then, cs.Name)
}

// committedWhy says, in the backend's words, why the active rotation can
// only complete (engine.CommitmentOf), ending where the consequence
// follows ("..., so" or "... and").
func committedWhy(cs *v1.CredentialSet, c engine.Commitment) string {
	w := secretWord(cs)
	switch c {
	case engine.Retired:
		return termsFor(cs).AlreadyRetired + ", so"
	case engine.Retiring:
		return "began discarding the old " + w + ", so some instances may refuse them already and"
	}
	return fmt.Sprintf("replaced the %s in place (%s InPlace), so the old %s no longer exist and", w, backendName(cs), w)
}

// activeRotation: rotation id is Rotating or Distributed.
func activeRotation(st v1.CredentialSetStatus, id string) bool {
	return engine.Active(st) && st.RotationID == id
}

// sourceSecret names the operator's source Secret as plan does.
func sourceSecret(cs *v1.CredentialSet) string {
	return naming.SourceSecretName(cs) + " (in the operator's namespace)"
}

// rollbackSteps is how the operator rolls an active rotation back
// (internal/controller/rollback.go), for abort and for recover.
func rollbackSteps(cs *v1.CredentialSet) []string {
	return append([]string{
		"status returns to Idle with resetPending (Event RotationAborted); " + termsFor(cs).RollbackSafe,
		"the distribution Secrets get the current " + secretWord(cs) + " again: " + distributionList(cs),
		"the consumers restart and roll out onto them: " + consumerList(cs) + "; then the operator waits " + graceText(cs) + " before step 4, for consumers it cannot watch",
	}, resetSteps(cs)...)
}

// graceText is how long the operator waits after a rollback's rollout
// before it resets the backend: the set's gracePeriod, or the manager's
// default.
func graceText(cs *v1.CredentialSet) string {
	if g := cs.Spec.Rotation.GracePeriod; g != nil {
		return "gracePeriod (" + g.Duration.String() + ")"
	}
	return "gracePeriod (the manager's --default-grace-period, 5m unless set otherwise)"
}

// resetSteps are the last steps of every rollback and recovery
// (internal/controller/rollback.go reset).
func resetSteps(cs *v1.CredentialSet) []string {
	return []string{
		termsFor(cs).Reset,
		"the source Secret " + sourceSecret(cs) + " drops any pending " + secretWord(cs) + ", resetPending is cleared (Event ResetApplied) and the request annotation removed",
	}
}

func printSteps(out io.Writer, steps []string) {
	for i, st := range steps {
		fmt.Fprintf(out, "  %d. %s\n", i+1, st)
	}
}

func distributionList(cs *v1.CredentialSet) string {
	if len(cs.Spec.Distribution) == 0 {
		return "none (spec.distribution is empty)"
	}
	var names []string
	for _, t := range cs.Spec.Distribution {
		names = append(names, t.Namespace+"/"+t.Name)
	}
	return strings.Join(names, ", ")
}

func consumerList(cs *v1.CredentialSet) string {
	if len(cs.Spec.Consumers) == 0 {
		return "none (spec.consumers is empty)"
	}
	var names []string
	for _, c := range cs.Spec.Consumers {
		ns := c.Namespace
		if ns == "" {
			ns = cs.Namespace
		}
		names = append(names, fmt.Sprintf("%s %s/%s", c.Kind, ns, c.Name))
	}
	return strings.Join(names, ", ")
}
