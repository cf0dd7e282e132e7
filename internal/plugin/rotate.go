package plugin

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
)

func newRotateCommand(a *app) *cobra.Command {
	var (
		w      waitFlags
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "rotate NAME",
		Short: "Start a rotation: new credentials next to the current ones, then distributed",
		Long: `rotate annotates the CredentialSet with rekey.io/rotate=<new UUID>, as
  kubectl annotate credentialset NAME rekey.io/rotate=$(uuidgen)
would. The operator makes the new credentials, writes them to the
distribution Secrets and restarts the consumers:
` + backendHelp(func(h registry.Help) string { return h.Rotate }) + `The set must be Idle. Before it starts, the operator runs the checks of
kubectl rekey check and refuses the rotation (PreflightFailed) if one
fails; the request stays, and starts once kubectl rekey check passes.
--dry-run prints what a rotation would touch and the last check's answer.`,
		Example: `  kubectl rekey rotate moco -n shop --dry-run
  kubectl rekey rotate moco -n shop --wait --timeout 5m`,
		Args: nameArg("rotate"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(cmd); err != nil {
				return err
			}
			if dryRun && w.wait {
				return fmt.Errorf("--dry-run changes nothing, so there is nothing to --wait for: drop one of them")
			}
			s, err := a.session()
			if err != nil {
				return err
			}
			return s.rotate(cmd.Context(), args[0], dryRun, w)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what a rotation would touch, change nothing")
	w.bind(cmd, "the new credentials are distributed (phase Distributed)")
	return cmd
}

func (s *session) rotate(ctx context.Context, name string, dryRun bool, w waitFlags) error {
	var (
		cs   *v1.CredentialSet
		seen baseline
	)
	id := uuid.NewString()
	err := s.request(func() (err error) {
		if cs, err = s.getSet(ctx, name); err != nil {
			return err
		}
		if err := checkRotatable(cs); err != nil {
			return err
		}
		if dryRun {
			return nil
		}
		evs, err := s.listEvents(ctx, name)
		if err != nil {
			return err
		}
		seen = newBaseline(eventsAbout(evs, cs))
		return s.annotate(ctx, cs, engine.RotateAnnotation, id)
	})
	if err != nil {
		return err
	}
	if dryRun {
		if err := s.printPlan(ctx, cs); err != nil {
			return err
		}
		printLastCheck(s.opts.Out, cs, s.opts.Now(), s.ns)
		return nil
	}
	fmt.Fprintf(s.opts.Out, "rotation %s requested for credentialset %s\n", id, setRef(cs))
	if cs.Status.ResetPending {
		// The operator finishes a rollback before it starts anything.
		fmt.Fprintf(s.opts.Out, "note: it starts once the pending reset of a rollback is done (%s)\n", nextStep(cs, s.opts.Now()))
	}
	if !w.wait {
		fmt.Fprintf(s.opts.Out, "follow it with: kubectl rekey status %s -n %s\n", name, s.ns)
		return nil
	}
	g := goal{
		what:  fmt.Sprintf("rotation %s to reach Distributed", id),
		fatal: rotateRefusals(),
		done: func(cs *v1.CredentialSet) bool {
			// A set without consumers under AfterRollout may complete
			// before the first read (or a relist after a watch ended): a
			// finished rotation has been distributed.
			return cs.Status.Phase == v1.PhaseDistributed && cs.Status.RotationID == id || cs.Status.LastRotationID == id
		},
	}
	cs, err = s.follow(ctx, name, seen, g, w.timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.opts.Out, "rotation %s distributed: %s\nnext step: %s\n", id, termsFor(cs).BothWork, NextStep(cs))
	return nil
}

// checkRotatable refuses a rotate the operator would refuse or that would
// overwrite a request it has not served yet.
func checkRotatable(cs *v1.CredentialSet) error {
	st := cs.Status
	switch st.Phase {
	case v1.PhaseRotating:
		return fmt.Errorf("credentialset %q is not Idle: rotation %s is active (phase Rotating, %s); let it reach Distributed (kubectl rekey status %s), then finish it with kubectl rekey discard %s before rotating again",
			cs.Name, st.RotationID, termsFor(cs).Applying, cs.Name, cs.Name)
	case v1.PhaseDistributed:
		return fmt.Errorf("credentialset %q is not Idle: rotation %s is active (phase Distributed); finish it with kubectl rekey discard %s before rotating again",
			cs.Name, st.RotationID, cs.Name)
	}
	if req := cs.Annotations[engine.RotateAnnotation]; req != "" && req != st.LastRotationID {
		return fmt.Errorf("credentialset %q already has rotation request %s that the operator has not started yet (is it running?): follow it with kubectl rekey status %s, or withdraw it with kubectl annotate credentialset %s %s-",
			cs.Name, req, cs.Name, cs.Name, engine.RotateAnnotation)
	}
	return nil
}
