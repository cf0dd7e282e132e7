package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
)

// showFlags are show's choices: which identity (picks: each backend's
// flag), and how to print it.
type showFlags struct {
	picks  []*pickFlag
	format string
	// print is -o: the credential as an object (json, yaml, jsonpath=...)
	// instead of --format's text.
	print *genericclioptions.PrintFlags
}

func newShowCommand(a *app) *cobra.Command {
	f := showFlags{picks: pickFlags(), print: genericclioptions.NewPrintFlags("")}
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Print one credential as consumers get it (the only command that prints secrets)",
		Long: `show reads the set's first distribution Secret, which holds what consumers
are given: the current credentials, or the new ones from the moment a rotation
distributed them. Formats, by backend:
` + backendHelp(func(h registry.Help) string { return h.Show }) + `env output is shell-quoted, so it can be sourced.
-o json, yaml, jsonpath=... or go-template=... print the credential as an
object instead: kind Credential (printed by the plugin, not an API resource)
with the set, the identity, the active rotation if any, the distribution
Secret it was read from and, under values, what --format env prints.`,
		Example: `  kubectl rekey show moco -n shop --user moco-readonly --format mycnf > ~/.my.cnf
  kubectl rekey show ceph-csi -n rook-ceph --entity client.csi-rbd --format keyring
  kubectl rekey show nova-transport -n openstack --format url
  kubectl rekey show orders -n shop --user orders -o jsonpath='{.values.MYSQL_PASSWORD}'`,
		Args: nameArg("show"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.session()
			if err != nil {
				return err
			}
			return s.show(cmd.Context(), args[0], f)
		},
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if *f.print.OutputFormat != "" && cmd.Flags().Changed("format") {
				return fmt.Errorf("--format and -o both choose the output: use one")
			}
			return nil
		},
	}
	f.print.AddFlags(cmd)
	if o := cmd.Flags().Lookup("output"); o != nil {
		o.Usage = "print the credential as an object: " + strings.Join(f.print.AllowedFormats(), ", ") + " (default: --format's text)"
	}
	for _, p := range f.picks {
		p.bind(cmd)
	}
	// The per-backend formats are in the long help: this text is what
	// users of MySQL sets have always seen.
	cmd.Flags().StringVar(&f.format, "format", "plain", "output format: plain, mycnf or env")
	return cmd
}

func (s *session) show(ctx context.Context, name string, f showFlags) error {
	cs, err := s.getSet(ctx, name)
	if err != nil {
		return err
	}
	if !hasBackend(cs) {
		return noBackend(cs, "it has no credential to show")
	}
	b := backendOf(cs)
	if b.Show.Credential == nil {
		return fmt.Errorf("credentialset %q is a %s set, whose credentials show does not print", cs.Name, b.Name)
	}
	if b.Resolve != nil {
		cs = b.Resolve(cs)
	}
	var printer printers.ResourcePrinter
	if *f.print.OutputFormat != "" {
		if printer, err = f.print.ToPrinter(); err != nil {
			if genericclioptions.IsNoCompatiblePrinterError(err) {
				return fmt.Errorf("unknown output format %q: use %s", *f.print.OutputFormat, strings.Join(f.print.AllowedFormats(), ", "))
			}
			return err
		}
		f.format = "env" // the credential's fields, as env names them
	}
	if !slices.Contains(b.Show.Formats, f.format) {
		return b.Show.UnknownFormat(b.Name, f.format)
	}
	if len(cs.Spec.Distribution) == 0 {
		return fmt.Errorf("credentialset %q has no distribution target (spec.distribution is empty), so no Secret outside the operator's namespace holds its %s: add one to spec.distribution", cs.Name, secretWord(cs))
	}
	who, err := pickFor(cs, b, f.picks)
	if err != nil {
		return err
	}
	c, err := b.Show.Credential(cs, registry.Pick{Identity: who, Format: f.format})
	if err != nil {
		return err
	}
	t, keys, ok := showTarget(cs, c.Keys)
	if !ok {
		if fm, formatted := registry.FormatFor(t.Format); formatted {
			return fmt.Errorf("every distribution target of credentialset %q is in %s, or add a target without format to spec.distribution", cs.Name, fm.Unread(t))
		}
		return fmt.Errorf("no distribution target of credentialset %q holds %s: each carries another one (distribution[].login); pick one of those, or add a target without login to spec.distribution", cs.Name, c.Who)
	}
	sec := &corev1.Secret{}
	err = s.c.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, sec)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("distribution Secret %s/%s does not exist yet: the operator writes it once the set is provisioned (kubectl rekey status %s)", t.Namespace, t.Name, cs.Name)
	}
	if err != nil {
		return fmt.Errorf("read distribution Secret %s/%s: %w", t.Namespace, t.Name, err)
	}
	var vals []string
	for _, k := range keys {
		v, ok := sec.Data[k]
		if !ok || len(v) == 0 {
			return fmt.Errorf("distribution Secret %s/%s has no key %s for %s: the operator has not distributed it yet (kubectl rekey status %s)", t.Namespace, t.Name, k, c.Who, cs.Name)
		}
		vals = append(vals, string(v))
	}
	if printer != nil {
		return printer.PrintObj(credentialObject(cs, t, c, vals), s.opts.Out)
	}
	if c.Render == nil {
		c.Render = func(v []string) (string, error) { return envLines(c.Fields(v)...), nil }
	}
	text, err := c.Render(vals)
	if err != nil {
		return err
	}
	if st := cs.Status; st.RotationID != "" && st.RotateApplied {
		// On stderr, so that redirected output stays a clean credential.
		fmt.Fprintf(s.opts.Err, "note: rotation %s is active; %s\n", st.RotationID, c.Note)
	}
	_, err = fmt.Fprint(s.opts.Out, text)
	return err
}

// credentialObject is show -o's object: kind Credential, which only the
// plugin prints (no API serves it), so that -o json|yaml|jsonpath work on a
// credential as on any kubectl object.
func credentialObject(cs *v1.CredentialSet, from v1.SecretTarget, c registry.Credential, vals []string) *unstructured.Unstructured {
	values := map[string]any{}
	pairs := c.Fields(vals)
	for i := 0; i+1 < len(pairs); i += 2 {
		values[pairs[i]] = pairs[i+1]
	}
	obj := map[string]any{
		"apiVersion": v1.GroupVersion.String(),
		"kind":       "Credential",
		"metadata":   map[string]any{"name": cs.Name, "namespace": cs.Namespace},
		"backend":    backendName(cs),
		"identity":   c.Who,
		"secret":     map[string]any{"namespace": from.Namespace, "name": from.Name},
		"values":     values,
	}
	if st := cs.Status; st.RotationID != "" && st.RotateApplied {
		obj["rotationID"] = st.RotationID
	}
	return &unstructured.Unstructured{Object: obj}
}

// nativeTarget is the first distribution target in the backend's own
// layout of the whole set; without one, the first target.
func nativeTarget(cs *v1.CredentialSet) (v1.SecretTarget, bool) {
	for _, t := range cs.Spec.Distribution {
		if _, ok := registry.FormatFor(t.Format); !ok && !registry.NamesOne(cs, t) {
			return t, true
		}
	}
	return cs.Spec.Distribution[0], false
}

// showTarget is the target show reads keys (of the backend's own layout)
// from, and where it holds them: the first in that layout of the whole
// set, else the first carrying just the identity shown. Without one, the
// first target.
func showTarget(cs *v1.CredentialSet, keys []string) (v1.SecretTarget, []string, bool) {
	if t, ok := nativeTarget(cs); ok {
		return t, keys, true
	}
	for _, t := range cs.Spec.Distribution {
		if _, ok := registry.FormatFor(t.Format); ok {
			continue
		}
		var at []string
		for _, k := range keys {
			if to, ok := registry.TargetKey(cs, t, k); ok {
				at = append(at, to)
			}
		}
		if len(at) == len(keys) {
			return t, at, true
		}
	}
	return cs.Spec.Distribution[0], nil, false
}
