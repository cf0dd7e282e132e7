package plugin

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
)

// printPlan is rotate --dry-run: what a rotation would touch, read from the
// spec and the cluster's objects, never from the backend (only the
// operator connects to it).
func (s *session) printPlan(ctx context.Context, cs *v1.CredentialSet) error {
	if !hasBackend(cs) {
		return noBackend(cs, "there is no rotation to plan")
	}
	b := backendOf(cs)
	out := s.opts.Out
	if gen := cs.Status.KeyGeneration; gen > 0 {
		fmt.Fprintf(out, "Dry run: nothing was changed. A rotation of credentialset %s would move generation %d to %d.\n", setRef(cs), gen, targetGeneration(cs))
	} else {
		fmt.Fprintf(out, "Dry run: nothing was changed. Credentialset %s is not provisioned yet: the operator provisions generation %d first, then this rotation makes generation %d.\n",
			setRef(cs), engine.InitialGeneration(cs.Spec.Rotation), targetGeneration(cs))
	}
	if err := b.Plan(ctx, out, cs, reader{s.c, cs.Namespace}); err != nil {
		return err
	}
	printSecretsPlan(out, cs, b)
	fmt.Fprintln(out, "Workloads to restart:")
	for _, c := range cs.Spec.Consumers {
		fmt.Fprintf(out, "  %s\n", s.describeConsumer(ctx, cs, c))
	}
	if len(cs.Spec.Consumers) == 0 {
		fmt.Fprintln(out, "  none (spec.consumers is empty)")
	}
	if len(cs.Spec.ConsumerGroups) > 0 {
		// Nothing restarts these: outside automation updates them and
		// reports members, and discard waits for every one.
		fmt.Fprintln(out, "Consumer groups (outside automation reports updated members with kubectl rekey ack):")
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, g := range cs.Spec.ConsumerGroups {
			fmt.Fprintf(tw, "  %s\t%d members\n", g.Name, len(g.Members))
		}
		tw.Flush()
	}
	fmt.Fprintln(out, b.Then(cs, registry.Discard{
		Auto:    autoDiscards(cs),
		Held:    !autoDiscards(cs) && cs.Spec.Rotation.DiscardPolicy == v1.DiscardAfterRollout,
		Command: fmt.Sprintf("kubectl rekey discard %s -n %s", cs.Name, s.ns),
	}))
	return nil
}

// printSecretsPlan lists the Secrets a rotation writes: the source Secret
// first (a secret is stored before any consumer is given it),
// then the distribution targets.
func printSecretsPlan(out io.Writer, cs *v1.CredentialSet, b registry.Describe) {
	fmt.Fprintln(out, "Secrets to update:")
	fmt.Fprintf(out, "  source Secret %s in the operator's namespace (%s)\n", naming.SourceSecretName(cs), b.Words(cs).SourceNote)
	for _, t := range cs.Spec.Distribution {
		fmt.Fprintf(out, "  %s/%s%s\n", t.Namespace, t.Name, registry.TargetNote(cs, t))
	}
	if len(cs.Spec.Distribution) == 0 {
		fmt.Fprintln(out, "  no distribution Secret (spec.distribution is empty)")
	} else if b.RenderedKeys != nil {
		if _, ok := nativeTarget(cs); ok {
			each := "each distribution Secret gets"
			if formatted(cs) {
				each = "each other distribution Secret gets"
			}
			fmt.Fprintf(out, "  %s %s\n", each, b.RenderedKeys(cs))
		}
	}
	if b.MoreSecrets != nil {
		for _, line := range b.MoreSecrets(cs) {
			fmt.Fprintf(out, "  %s\n", line)
		}
	}
}

// reader reads a plan's objects in the set's namespace.
type reader struct {
	c  client.Client
	ns string
}

func (r reader) StatefulSet(ctx context.Context, name string) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: name}, sts); err != nil {
		return nil, err
	}
	return sts, nil
}

// formatted: some target is in a format other than the backend's own, or
// carries one identity of the set.
func formatted(cs *v1.CredentialSet) bool {
	for _, t := range cs.Spec.Distribution {
		if _, ok := registry.FormatFor(t.Format); ok || registry.NamesOne(cs, t) {
			return true
		}
	}
	return false
}

// describeConsumer names a consumer and says if it is missing, which the
// operator would report as a rollout that never completes.
func (s *session) describeConsumer(ctx context.Context, cs *v1.CredentialSet, c v1.ConsumerRef) string {
	ns := c.Namespace
	if ns == "" {
		ns = cs.Namespace
	}
	line := fmt.Sprintf("%s %s/%s", c.Kind, ns, c.Name)
	var obj client.Object
	switch c.Kind {
	case v1.KindStatefulSet:
		obj = &appsv1.StatefulSet{}
	case v1.KindDeployment:
		obj = &appsv1.Deployment{}
	case v1.KindCronJob:
		obj = &batchv1.CronJob{}
	default:
		obj = &appsv1.DaemonSet{}
	}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, obj); apierrors.IsNotFound(err) {
		line += " (not found: discard would wait for it forever)"
	}
	return line
}
