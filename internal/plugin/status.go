package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// statusFlags are status's output choices, named as kubectl get's.
type statusFlags struct {
	print         *genericclioptions.PrintFlags
	allNamespaces bool
	verbose       bool
	noHeaders     bool
	showLabels    bool
	labelColumns  []string
	selector      string
	watch         bool
}

// tableFormats is the one -o format beyond cli-runtime's printers: the table with more columns.
const tableFormats = "wide"

func newStatusCommand(a *app) *cobra.Command {
	f := statusFlags{print: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme)}
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show where each CredentialSet is in its rotation cycle and what to do next",
		Long: `status prints one line per CredentialSet in the namespace (or only NAME):
its phase and step, key generation, active rotation, age of the current
credentials, consumers on the newest credentials, the newest Event and the
next step (what the operator waits for, and until when). -o wide adds the
backend, the discard policy and the last completed rotation;
-o custom-columns=HEADER:PATH,... prints columns of your choice; -o json,
yaml, name, jsonpath=... or go-template=... print the CredentialSet (a
CredentialSetList without NAME) as kubectl get does. -A lists every
namespace, -l selects by label, --no-headers, --show-labels and -L work as
with kubectl get, and -w prints a line again whenever a set changes.
A long next step is shortened in the table; -v prints it in full under
the table, with each set's wait and its deadline, conditions, instances
(as the last kubectl rekey check found them), users and consumers.`,
		Example: `  kubectl rekey status -n shop
  kubectl rekey status moco -n shop
  kubectl rekey status -A -o wide
  kubectl rekey status moco -n shop -v
  kubectl rekey status -n shop -l team=payments -w
  kubectl rekey status -A --no-headers -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name,WAITS:.status.waiting.for
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
			if f.selector != "" && len(args) == 1 {
				return fmt.Errorf("a CredentialSet named and a label selector (-l) do not go together: drop one")
			}
			if f.verbose && f.watch {
				return fmt.Errorf("-v and -w do not go together: -w prints one line per change; run status -v NAME for the details")
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
			return s.status(cmd.Context(), args, out)
		},
	}
	f.print.AddFlags(cmd)
	if o := cmd.Flags().Lookup("output"); o != nil {
		o.Usage = "Output format: wide, custom-columns=HEADER:PATH,..., " + strings.Join(f.print.AllowedFormats(), ", ") + " (default: the status table)"
	}
	cmd.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "list the CredentialSets of every namespace")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "under the table, each set's full next step, wait, conditions, instances, users and consumers")
	cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "print the table (or custom columns) without headers")
	cmd.Flags().BoolVar(&f.showLabels, "show-labels", false, "add each set's labels as the last column")
	cmd.Flags().StringSliceVarP(&f.labelColumns, "label-columns", "L", nil, "add a column with the value of each of these labels")
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "only the sets these labels select (e.g. -l team=payments,tier!=test)")
	cmd.Flags().BoolVarP(&f.watch, "watch", "w", false, "after the first listing, print the set again whenever it changes (until interrupted)")
	return cmd
}

// statusOutput is how status prints: a table (the status table or custom
// columns) through cli-runtime's table printer, or one of its printers for
// the objects themselves.
type statusOutput struct {
	table   printers.ResourcePrinter // the table printer, nil for the object printers
	columns *customColumns           // -o custom-columns, nil for the status table
	printer printers.ResourcePrinter // -o json, yaml, name, ...; nil for a table
	perItem bool                     // the printer takes no lists (-o name)
	verbose bool                     // the details under the table
	sel     labels.Selector          // -l; nil: every set
	watch   bool
	flush   func() error // -w's tabwriter, flushed after each print
}

func (f *statusFlags) printer() (statusOutput, error) {
	out := statusOutput{verbose: f.verbose, watch: f.watch}
	if f.selector != "" {
		sel, err := labels.Parse(f.selector)
		if err != nil {
			return out, fmt.Errorf("-l %q is not a label selector: %w", f.selector, err)
		}
		out.sel = sel
	}
	format := *f.print.OutputFormat
	opts := printers.PrintOptions{NoHeaders: f.noHeaders, WithNamespace: f.allNamespaces, ShowLabels: f.showLabels, ColumnLabels: f.labelColumns}
	switch {
	case format == "" || format == tableFormats:
		opts.Wide = format == tableFormats
		out.table = printers.NewTablePrinter(opts)
		return out, nil
	case strings.HasPrefix(format, customColumnsPrefix):
		c, err := parseCustomColumns(format)
		if err != nil {
			return out, err
		}
		opts.WithNamespace, opts.ShowLabels, opts.ColumnLabels = false, false, nil
		out.table, out.columns = printers.NewTablePrinter(opts), c
		return out, nil
	}
	if f.verbose {
		return out, fmt.Errorf("-v adds details under the table: it does not go with -o %s", format)
	}
	p, err := f.print.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return out, fmt.Errorf("unknown output format %q: use wide, custom-columns=HEADER:PATH,..., %s", format, strings.Join(f.print.AllowedFormats(), ", "))
	}
	if err != nil {
		return out, err
	}
	out.printer, out.perItem = p, format == "name"
	return out, nil
}

func (s *session) status(ctx context.Context, args []string, out statusOutput) error {
	name := ""
	if len(args) == 1 {
		name = args[0]
	}
	sets, rv, err := s.readSets(ctx, name, out.sel)
	if err != nil {
		return err
	}
	if len(sets) == 0 && !out.watch {
		s.noSets(out.sel)
		return nil
	}
	w := io.Writer(s.opts.Out)
	if out.watch && out.table != nil {
		// One tabwriter for the whole watch, as kubectl get -w: the rows
		// printed later line up with the first listing.
		tw := printers.GetNewTabWriter(s.opts.Out)
		w, out.flush = tw, tw.Flush
	}
	if err := s.printSets(ctx, w, sets, name, out, true); err != nil {
		return err
	}
	if out.verbose {
		writeDetails(s.opts.Out, sets, s.opts.Now())
	}
	if !out.watch {
		return nil
	}
	return s.watchSets(ctx, w, name, rv, out)
}

// noSets says, on stderr as kubectl does, that nothing matched.
func (s *session) noSets(sel labels.Selector) {
	where := fmt.Sprintf("in namespace %q", s.ns)
	if s.ns == "" {
		where = "in any namespace"
	}
	if sel != nil && !sel.Empty() {
		where += " matching " + sel.String()
	}
	fmt.Fprintf(s.opts.Err, "no credentialsets %s\n", where)
}

// printSets prints sets as out says; list: they are the first listing
// (a list printer gets a CredentialSetList), not a change seen by -w.
func (s *session) printSets(ctx context.Context, w io.Writer, sets []v1.CredentialSet, name string, out statusOutput, list bool) error {
	if out.flush != nil {
		defer out.flush()
	}
	switch {
	case out.printer != nil && (out.perItem || !list || name != ""):
		// As kubectl get: one object, or -o name's one line per set.
		for i := range sets {
			if err := out.printer.PrintObj(&sets[i], w); err != nil {
				return err
			}
		}
		return nil
	case out.printer != nil:
		return out.printer.PrintObj(&v1.CredentialSetList{Items: sets}, w)
	case out.columns != nil:
		t, err := out.columns.table(setObjects(sets))
		if err != nil {
			return err
		}
		return out.table.PrintObj(t, w)
	}
	if len(sets) == 0 {
		return nil
	}
	evs, err := s.listEvents(ctx, eventsFor(sets, name))
	if err != nil {
		return err
	}
	return out.table.PrintObj(statusTable(sets, evs, s.opts.Now()), w)
}

// eventsFor is the set name whose Events a listing needs: name, or the
// one set -w saw change; "" for all.
func eventsFor(sets []v1.CredentialSet, name string) string {
	if name == "" && len(sets) == 1 {
		return sets[0].Name
	}
	return name
}

// discardPolicy is the set's spec.rotation.discardPolicy, Manual when unset.
func discardPolicy(cs *v1.CredentialSet) string {
	if p := cs.Spec.Rotation.DiscardPolicy; p != "" {
		return string(p)
	}
	return string(v1.DiscardManual)
}
