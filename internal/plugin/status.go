package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// statusFlags are status's output choices.
type statusFlags struct {
	print         *genericclioptions.PrintFlags
	allNamespaces bool
	verbose       bool
}

// tableFormats is the one -o format beyond cli-runtime's printers: the table with more columns.
const tableFormats = "wide"

func newStatusCommand(a *app) *cobra.Command {
	f := statusFlags{print: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme)}
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show where each CredentialSet is in its rotation cycle and what to do next",
		Long: `status prints one line per CredentialSet in the namespace (or only NAME):
its phase, key generation, active rotation, age of the current credentials,
consumers on the newest credentials, the newest Event and the next step.
-o wide adds the backend, the discard policy and the last completed rotation;
-o json, yaml, name, jsonpath=... or go-template=... print the CredentialSet
(a CredentialSetList without NAME) as kubectl get does. -A lists every
namespace. A long next step is shortened in the table; -v prints it in
full under the table, with each set's conditions and consumers.`,
		Example: `  kubectl rekey status -n shop
  kubectl rekey status moco -n shop
  kubectl rekey status -A -o wide
  kubectl rekey status moco -n shop -v
  kubectl rekey status moco -n shop -o jsonpath='{.status.phase}'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("status takes at most one CredentialSet name, got %d: %v", len(args), args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.allNamespaces && len(args) == 1 {
				return fmt.Errorf("a CredentialSet cannot be named across all namespaces: drop -A, or NAME and pass -n NAMESPACE")
			}
			out, err := f.printer()
			if err != nil {
				return err
			}
			s, err := a.session()
			if err != nil {
				return err
			}
			if f.allNamespaces {
				s.ns = ""
			}
			out.verbose = f.verbose
			return s.status(cmd.Context(), args, out)
		},
	}
	f.print.AddFlags(cmd)
	if o := cmd.Flags().Lookup("output"); o != nil {
		o.Usage = "Output format: wide, " + strings.Join(f.print.AllowedFormats(), ", ") + " (default: the status table)"
	}
	cmd.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "list the CredentialSets of every namespace")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "under the table, each set's full next step, conditions and consumers")
	return cmd
}

// statusOutput is how status prints: the table (wide or not), or a
// cli-runtime printer for the objects themselves.
type statusOutput struct {
	wide    bool
	printer printers.ResourcePrinter // nil for the table
	perItem bool                     // the printer takes no lists (-o name)
	verbose bool                     // the details under the table
}

func (f *statusFlags) printer() (statusOutput, error) {
	switch *f.print.OutputFormat {
	case "":
		return statusOutput{}, nil
	case tableFormats:
		return statusOutput{wide: true}, nil
	}
	p, err := f.print.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return statusOutput{}, fmt.Errorf("unknown output format %q: use wide, %s", *f.print.OutputFormat, strings.Join(f.print.AllowedFormats(), ", "))
	}
	if err != nil {
		return statusOutput{}, err
	}
	return statusOutput{printer: p, perItem: *f.print.OutputFormat == "name"}, nil
}

func (s *session) status(ctx context.Context, args []string, out statusOutput) error {
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
	if out.printer != nil {
		// The objects as the API serves them, as kubectl get -o prints.
		if len(args) == 1 {
			return out.printer.PrintObj(&sets[0], s.opts.Out)
		}
		if out.perItem {
			// -o name prints no list: one line per set, as kubectl get.
			for i := range sets {
				if err := out.printer.PrintObj(&sets[i], s.opts.Out); err != nil {
					return err
				}
			}
			return nil
		}
		return out.printer.PrintObj(&v1.CredentialSetList{Items: sets}, s.opts.Out)
	}
	if len(sets) == 0 {
		if s.ns == "" {
			fmt.Fprintln(s.opts.Err, "no credentialsets in any namespace")
		} else {
			fmt.Fprintf(s.opts.Err, "no credentialsets in namespace %q\n", s.ns)
		}
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
	writeTable(s.opts.Out, sets, evs, s.opts.Now(), tableColumns{namespace: s.ns == "", wide: out.wide})
	if out.verbose {
		writeDetails(s.opts.Out, sets, s.opts.Now())
	}
	return nil
}

// tableColumns are the optional columns: NAMESPACE first with -A, and with
// -o wide BACKEND, DISCARD (policy) and LAST ROTATION at the end.
type tableColumns struct{ namespace, wide bool }

// writeTable prints the status table; rows come from spec, status and
// Events only.
func writeTable(out io.Writer, sets []v1.CredentialSet, evs []eventsv1.Event, now time.Time, cols tableColumns) {
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	header := "NAME\tPHASE\tGENERATION\tROTATION\tAGE\tCONSUMERS\tLAST EVENT\tNEXT STEP"
	if cols.namespace {
		header = "NAMESPACE\t" + header
	}
	if cols.wide {
		header += "\tBACKEND\tDISCARD\tLAST ROTATION"
	}
	fmt.Fprintln(tw, header)
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
		if cols.namespace {
			fmt.Fprintf(tw, "%s\t", cs.Namespace)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s", cs.Name, orDash(string(st.Phase)), st.KeyGeneration,
			orDash(st.RotationID), age, consumersCell(cs), last, tableStep(cs, now))
		if cols.wide {
			fmt.Fprintf(tw, "\t%s\t%s\t%s", backendName(cs), discardPolicy(cs), orDash(st.LastRotationID))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// consumersCell is "n/m" consumers moved; with consumer groups it adds the
// members acknowledged across all groups, "n/m members x/y".
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

// discardPolicy is the set's spec.rotation.discardPolicy, Manual when unset.
func discardPolicy(cs *v1.CredentialSet) string {
	if p := cs.Spec.Rotation.DiscardPolicy; p != "" {
		return string(p)
	}
	return string(v1.DiscardManual)
}
