package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
)

func newDiscardCommand(a *app) *cobra.Command {
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "discard NAME",
		Short: "Finish a rotation: the old credentials are retired",
		Long: `discard annotates the CredentialSet with rekey.io/discard=<active rotation ID>,
as kubectl annotate could. The operator waits until every consumer has rolled
out, retires the old credentials and returns to Idle with the next key
generation:
` + backendHelp(func(h registry.Help) string { return h.Discard }) + `The set must be Distributed.`,
		Example: `  kubectl rekey discard moco -n shop --wait`,
		Args:    nameArg("discard"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(cmd); err != nil {
				return err
			}
			s, err := a.session()
			if err != nil {
				return err
			}
			return s.discard(cmd.Context(), args[0], w)
		},
	}
	w.bind(cmd, "the rotation is complete (phase Idle, next generation)")
	return cmd
}

func (s *session) discard(ctx context.Context, name string, w waitFlags) error {
	r, err := s.requestRotationStep(ctx, name, discardable, engine.DiscardAnnotation)
	if err != nil {
		return err
	}
	cs, id, seen, already := r.cs, r.id, r.seen, r.already
	gen := cs.Status.KeyGeneration
	if already {
		fmt.Fprintf(s.opts.Out, "discard of rotation %s was already requested for credentialset %s\n", id, setRef(cs))
	} else {
		fmt.Fprintf(s.opts.Out, "discard of rotation %s requested for credentialset %s\n", id, setRef(cs))
	}
	if !rolledOut(cs) {
		fmt.Fprintf(s.opts.Out, termsFor(cs).RetireWait+"\n", consumerCount(cs))
	}
	if !w.wait {
		fmt.Fprintf(s.opts.Out, "follow it with: kubectl rekey status %s -n %s\n", name, s.ns)
		return nil
	}
	g := goal{
		what:  fmt.Sprintf("rotation %s to complete (phase Idle, generation %d)", id, targetGeneration(cs)),
		fatal: discardRefusals,
		done: func(cs *v1.CredentialSet) bool {
			return cs.Status.LastRotationID == id || cs.Status.Phase == v1.PhaseIdle && cs.Status.KeyGeneration > gen
		},
	}
	cs, err = s.follow(ctx, name, seen, g, w.timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.opts.Out, "rotation %s complete: generation %d is current, %s\n", id, cs.Status.KeyGeneration, termsFor(cs).Retired)
	return nil
}

// discardable returns the rotation to discard, or why there is none yet.
func discardable(cs *v1.CredentialSet) (string, error) {
	st := cs.Status
	switch st.Phase {
	case v1.PhaseDistributed:
		return st.RotationID, nil
	case v1.PhaseRotating:
		return "", fmt.Errorf("rotation %s of credentialset %q is still Rotating (%s), so the old ones cannot be discarded yet: wait until Distributed (kubectl rekey status %s), then discard",
			st.RotationID, cs.Name, termsFor(cs).Applying, cs.Name)
	}
	return "", fmt.Errorf("credentialset %q has no active rotation (phase %s), so there is nothing to discard: start one with kubectl rekey rotate %s",
		cs.Name, orDash(string(st.Phase)), cs.Name)
}
