package plugin

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func newStatusCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show where each CredentialSet is in its rotation cycle and what to do next",
		Long: `status prints one line per CredentialSet in the namespace (or only NAME):
its phase, key generation, active rotation, age of the current credentials,
consumers on the newest credentials, the newest Event and the next step.`,
		Example: `  kubectl rekey status -n shop
  kubectl rekey status moco -n shop`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("status takes at most one CredentialSet name, got %d: %v", len(args), args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.session()
			if err != nil {
				return err
			}
			return s.status(cmd.Context(), args)
		},
	}
}

func (s *session) status(ctx context.Context, args []string) error {
	var sets []v1.CredentialSet
	if len(args) == 1 {
		cs, err := s.getSet(ctx, args[0])
		if err != nil {
			return err
		}
		sets = []v1.CredentialSet{*cs}
	} else {
		var err error
		if sets, err = s.listSets(ctx); err != nil {
			return err
		}
	}
	if len(sets) == 0 {
		fmt.Fprintf(s.opts.Err, "no credentialsets in namespace %q\n", s.ns)
		return nil
	}
	only := ""
	if len(args) == 1 {
		only = args[0]
	}
	evs, err := s.listEvents(ctx, only)
	if err != nil {
		return err
	}
	writeTable(s.opts.Out, sets, evs, s.opts.Now())
	return nil
}

// writeTable prints the status table; rows come from status and Events only.
func writeTable(out io.Writer, sets []v1.CredentialSet, evs []eventsv1.Event, now time.Time) {
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPHASE\tGENERATION\tROTATION\tAGE\tCONSUMERS\tLAST EVENT\tNEXT STEP")
	for i := range sets {
		cs := &sets[i]
		st := cs.Status
		age := "-"
		if st.CurrentSince != nil {
			age = duration.HumanDuration(now.Sub(st.CurrentSince.Time))
		}
		last := "-"
		if mine := eventsAbout(evs, cs); len(mine) > 0 {
			last = mine[len(mine)-1].Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", cs.Name, orDash(string(st.Phase)), st.KeyGeneration,
			orDash(st.RotationID), age, consumersCell(cs), last, nextStep(cs, now))
	}
	tw.Flush()
}

// consumersCell is "n/m" consumers moved; with consumer groups it adds the
// members acknowledged across all groups, "n/m members x/y" (seed 004's
// node coverage).
func consumersCell(cs *v1.CredentialSet) string {
	cell := orDash(cs.Status.ConsumersUpdated)
	moved, total := 0, 0
	for _, g := range cs.Spec.ConsumerGroups {
		total += len(g.Members)
	}
	if total == 0 {
		return cell
	}
	for _, c := range cs.Status.Consumers {
		if c.Kind == v1.KindGroup && c.SecretHash == cs.Status.SecretHash {
			moved += len(c.MembersUpdated)
		}
	}
	return fmt.Sprintf("%s members %d/%d", cell, moved, total)
}
