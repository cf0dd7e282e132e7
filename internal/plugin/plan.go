package plugin

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mysql"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
)

// printPlan is rotate --dry-run: what a rotation would touch, read from the
// spec and the cluster's objects, never from the backend (only the
// operator connects to it).
func (s *session) printPlan(ctx context.Context, cs *v1.CredentialSet) error {
	if cs.Spec.MySQL == nil && cs.Spec.Ceph == nil && cs.Spec.RabbitMQ == nil {
		return fmt.Errorf("credentialset %q has no backend block (spec.mysql, spec.ceph or spec.rabbitmq), so there is no rotation to plan", cs.Name)
	}
	out := s.opts.Out
	if gen := cs.Status.KeyGeneration; gen > 0 {
		fmt.Fprintf(out, "Dry run: nothing was changed. A rotation of credentialset %s would move generation %d to %d.\n", setRef(cs), gen, targetGeneration(cs))
	} else {
		fmt.Fprintf(out, "Dry run: nothing was changed. Credentialset %s is not provisioned yet: the operator provisions generation %d first, then this rotation makes generation %d.\n",
			setRef(cs), engine.InitialGeneration(cs.Spec.Rotation), targetGeneration(cs))
	}
	switch {
	case cs.Spec.Ceph != nil:
		printCephPlan(out, cs)
	case cs.Spec.RabbitMQ != nil:
		printRabbitPlan(out, cs)
	default:
		if err := s.printMySQLPlan(ctx, out, cs); err != nil {
			return err
		}
	}
	printSecretsPlan(out, cs)
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
	printThen(out, cs, s.ns)
	return nil
}

func (s *session) printMySQLPlan(ctx context.Context, out io.Writer, cs *v1.CredentialSet) error {
	cs = asMOCO(cs)
	instances, note, err := s.instances(ctx, cs)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Instances (%d, each gets ALTER USER ... RETAIN CURRENT PASSWORD; role read live by the operator):\n", len(instances))
	for _, i := range instances {
		fmt.Fprintf(out, "  %s\n", i)
	}
	if note != "" {
		fmt.Fprintf(out, "  %s\n", note)
	}

	users, err := mysql.ResolveUsers(cs.Spec.MySQL)
	if err != nil {
		fmt.Fprintf(out, "Users: none usable: %v\n", err)
		return nil
	}
	fmt.Fprintf(out, "Users (%d):\n", len(users))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, u := range users {
		admin := ""
		if u.Name == cs.Spec.MySQL.Admin.User {
			admin = "\t(rekey connects as this user)"
		}
		fmt.Fprintf(tw, "  %s\tkey %s%s\n", u, u.Key, admin)
	}
	return tw.Flush()
}

// printSecretsPlan lists the Secrets a rotation writes: the source Secret
// first (a secret is stored before any consumer is given it),
// then the distribution targets.
func printSecretsPlan(out io.Writer, cs *v1.CredentialSet) {
	fmt.Fprintln(out, "Secrets to update:")
	fmt.Fprintf(out, "  source Secret %s in the operator's namespace (%s)\n", naming.SourceSecretName(cs), sourceNote(cs))
	for _, t := range cs.Spec.Distribution {
		fmt.Fprintf(out, "  %s/%s%s\n", t.Namespace, t.Name, formatNote(cs, t))
	}
	if len(cs.Spec.Distribution) == 0 {
		fmt.Fprintln(out, "  no distribution Secret (spec.distribution is empty)")
	} else if keys := distributedKeys(cs); keys != "" {
		if _, ok := nativeTarget(cs); ok {
			each := "each distribution Secret gets"
			if formatted(cs) {
				each = "each other distribution Secret gets"
			}
			fmt.Fprintf(out, "  %s %s\n", each, keys)
		}
	}
	if admin := cephAdminRotates(cs); admin != "" {
		ref := cs.Spec.Ceph.Admin.KeyringSecretRef.Name
		fmt.Fprintf(out, "  admin keyring Secret %s/%s (%s is one of the entities; while it rotates, the temporary %s's keyring is kept in %s/%s)\n",
			cs.Namespace, ref, admin, naming.CephRotatorEntity, cs.Namespace, naming.RotatorSecretName(ref))
	}
}

func printThen(out io.Writer, cs *v1.CredentialSet, ns string) {
	if cs.Spec.Ceph != nil || cs.Spec.RabbitMQ != nil {
		printBackendThen(out, cs, ns)
		return
	}
	if autoDiscards(cs) {
		fmt.Fprintln(out, "Then: the old passwords are discarded automatically once every consumer rolled out and the grace period passed (discardPolicy AfterRollout).")
		return
	}
	if cs.Spec.Rotation.DiscardPolicy == v1.DiscardAfterRollout {
		fmt.Fprintf(out, "Then: discardPolicy AfterRollout, but the set declares no consumer, so the operator does not discard by itself: once every client uses the new passwords, run kubectl rekey discard %s -n %s.\n", cs.Name, ns)
		return
	}
	fmt.Fprintf(out, "Then: once consumers rolled out and work, run kubectl rekey discard %s -n %s (discardPolicy Manual).\n", cs.Name, ns)
}

// instances lists instance addresses as the operator derives them
// (internal/controller/plan.go): hosts as given, or one DNS name per
// StatefulSet ordinal below spec.replicas. note explains an empty list.
func (s *session) instances(ctx context.Context, cs *v1.CredentialSet) ([]string, string, error) {
	in := cs.Spec.MySQL.Instances
	if in.StatefulSet == nil {
		return in.Hosts, "", nil
	}
	ref := in.StatefulSet
	sts := &appsv1.StatefulSet{}
	err := s.c.Get(ctx, client.ObjectKey{Namespace: cs.Namespace, Name: ref.Name}, sts)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("StatefulSet %s/%s does not exist: the operator cannot rotate until it does", cs.Namespace, ref.Name), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read StatefulSet %s/%s: %w", cs.Namespace, ref.Name, err)
	}
	if sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0 {
		return nil, fmt.Sprintf("StatefulSet %s/%s has replicas: 0: the operator refuses to rotate until it is scaled up", cs.Namespace, ref.Name), nil
	}
	var out []string
	for _, i := range mysql.StatefulSetInstances(sts, *ref) {
		out = append(out, i.Addr)
	}
	return out, "", nil
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
	default:
		obj = &appsv1.DaemonSet{}
	}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, obj); apierrors.IsNotFound(err) {
		line += " (not found: discard would wait for it forever)"
	}
	return line
}
