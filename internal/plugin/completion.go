package plugin

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
)

// completionTimeout bounds the API call behind one <TAB>: a shell waiting
// on an unreachable cluster is worse than no suggestion.
const completionTimeout = 5 * time.Second

// completeSetNames suggests the CredentialSets of the namespace in use (the
// command line's -n, --context and --kubeconfig apply), each described by its
// phase, for commands taking one NAME.
func completeSetNames(a *app) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := completionContext(cmd)
		defer cancel()
		s, err := a.session()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		sets, err := s.listSets(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, cs := range sets {
			if strings.HasPrefix(cs.Name, toComplete) {
				out = append(out, cobra.CompletionWithDesc(cs.Name, orDash(string(cs.Status.Phase))))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// registerFlagCompletions completes kubectl's --namespace (the namespaces the
// user may list) and --context (the kubeconfig's contexts), and gives every
// command taking a NAME the CredentialSet names.
func registerFlagCompletions(root *cobra.Command, a *app) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := completionContext(cmd)
		defer cancel()
		s, err := a.session()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		l := &corev1.NamespaceList{}
		if err := s.c.List(ctx, l); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, ns := range l.Items {
			if strings.HasPrefix(ns.Name, toComplete) {
				out = append(out, ns.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("context", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		raw, err := a.flags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for name := range raw.Contexts {
			if strings.HasPrefix(name, toComplete) {
				out = append(out, name)
			}
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

// addNameCompletion gives every subcommand whose usage takes a NAME the
// CredentialSet completion.
func addNameCompletion(root *cobra.Command, a *app) {
	for _, c := range root.Commands() {
		if strings.Contains(c.Use, "NAME") && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = completeSetNames(a)
		}
	}
}

func completionContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, completionTimeout)
}
