package plugin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

func newAckCommand(a *app) *cobra.Command {
	var group, members, hash string
	cmd := &cobra.Command{
		Use:   "ack NAME --group GROUP --members A,B",
		Short: "Report members of a consumer group as updated to the current credentials",
		Long: `ack records that members of a consumer group (spec.consumerGroups: nodes or
hosts that outside automation updates in batches) now use the credentials the
distribution Secrets hold. It writes the annotation rekey.io/ack.<group> =
<secretHash>:<members>, adding to earlier batches for the same hash. The old
credentials are retired only once every member of every group is acknowledged
for the current hash; an acknowledgement for an older hash does not count.

Automation should pass --secret-hash with the rekey.io/secret-hash annotation
of the Secret it actually deployed, read when it read the Secret: then a
rotation that happened while it ran is never acknowledged by mistake.`,
		Example: `  kubectl rekey ack nova-transport --group edpm-compute --members compute-0,compute-1
  kubectl rekey ack nova-transport --group edpm-compute --members compute-2 --secret-hash 3f9c2a1b7d4e`,
		Args: nameArg("ack"),
		RunE: func(cmd *cobra.Command, args []string) error {
			list := splitMembers(members)
			if group == "" || len(list) == 0 {
				return fmt.Errorf("ack needs --group and --members, e.g. --group edpm-compute --members compute-0,compute-1")
			}
			s, err := a.session()
			if err != nil {
				return err
			}
			return s.ack(cmd.Context(), args[0], group, list, hash)
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "the consumer group (spec.consumerGroups[].name)")
	cmd.Flags().StringVar(&members, "members", "", "comma-separated members that now use the current credentials")
	cmd.Flags().StringVar(&hash, "secret-hash", "", "the distribution the members were updated to (default: the one the Secrets hold now)")
	return cmd
}

func splitMembers(v string) []string {
	var out []string
	for _, m := range strings.Split(v, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

func (s *session) ack(ctx context.Context, name, group string, members []string, hash string) error {
	var next *v1.CredentialSet
	var g *v1.ConsumerGroup
	var key, h string
	// Retried on conflict: another batch may be recorded concurrently, and
	// neither may be lost.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cs, err := s.getSet(ctx, name)
		if err != nil {
			return err
		}
		if g, err = findGroup(cs, group); err != nil {
			return err
		}
		var unknown []string
		for _, m := range members {
			if !slices.Contains(g.Members, m) {
				unknown = append(unknown, m)
			}
		}
		if len(unknown) > 0 {
			return fmt.Errorf("group %s of %s has no members %s; its members are: %s", group, setRef(cs), strings.Join(unknown, ", "), strings.Join(g.Members, ", "))
		}
		current := cs.Status.SecretHash
		if current == "" {
			return fmt.Errorf("%s has not distributed credentials yet (no status.secretHash): wait until it is provisioned", setRef(cs))
		}
		h = cmp.Or(hash, current)
		if h != current {
			return fmt.Errorf("the distribution Secrets of %s now hold %s, not %s: the members were updated to credentials that are no longer current; update them again and acknowledge %s", setRef(cs), current, h, current)
		}
		key = engine.AckAnnotationPrefix + group
		next = cs.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[key] = engine.MergeAck(cs.Annotations[key], h, members)
		if err := s.c.Update(ctx, next, client.FieldOwner(FieldManager)); err != nil {
			// Still a conflict for RetryOnConflict: %w keeps the status.
			return fmt.Errorf("record acknowledgement on %s: %w", setRef(cs), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, all, _ := engine.ParseAck(next.Annotations[key])
	fmt.Fprintf(s.opts.Out, "acknowledged %s of group %s for %s (%s): %d/%d members recorded\n",
		strings.Join(members, ", "), group, setRef(next), h, len(all), len(g.Members))
	return nil
}

func findGroup(cs *v1.CredentialSet, name string) (*v1.ConsumerGroup, error) {
	var names []string
	for i, g := range cs.Spec.ConsumerGroups {
		if g.Name == name {
			return &cs.Spec.ConsumerGroups[i], nil
		}
		names = append(names, g.Name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s has no consumer groups (spec.consumerGroups): nothing to acknowledge", setRef(cs))
	}
	return nil, fmt.Errorf("%s has no consumer group %q; its groups are: %s", setRef(cs), name, strings.Join(names, ", "))
}
