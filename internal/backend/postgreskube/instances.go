package postgreskube

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
)

// podHosts are the host:port of sts's pods through its headless Service,
// in ordinal order.
func podHosts(sts *appsv1.StatefulSet, ref v1.PostgresStatefulSet) []string {
	svc := ref.ServiceName
	if svc == "" {
		svc = sts.Spec.ServiceName
	}
	port := ref.Port
	if port == 0 {
		port = 5432
	}
	replicas := int32(1)
	if sts.Spec.Replicas != nil {
		replicas = *sts.Spec.Replicas
	}
	var out []string
	for i := range replicas {
		out = append(out, fmt.Sprintf("%s-%d.%s.%s.svc:%d", sts.Name, i, svc, sts.Namespace, port))
	}
	return out
}

// hostsOf are the instances of spec: its hosts, or its StatefulSets' pods
// read live (a cached, stale replica count could leave a new instance out
// of a phase).
func hostsOf(ctx context.Context, k registry.Kube, namespace string, spec *v1.PostgresSpec) ([]string, error) {
	if len(spec.StatefulSets) == 0 {
		return spec.Hosts, nil
	}
	var out []string
	for _, ref := range spec.StatefulSets {
		sts, err := k.StatefulSet(ctx, ref.Name)
		if apierrors.IsNotFound(err) {
			return nil, &registry.SpecError{Msg: fmt.Sprintf("StatefulSet %s/%s named in spec.postgres.statefulSets does not exist: create it, or correct the name", namespace, ref.Name)}
		}
		if err != nil {
			return nil, err
		}
		if sts.Spec.ServiceName == "" && ref.ServiceName == "" {
			return nil, &registry.SpecError{Msg: fmt.Sprintf("StatefulSet %s/%s has no spec.serviceName, so its pods have no DNS name: set serviceName (a headless Service selecting them) in spec.postgres.statefulSets", namespace, ref.Name)}
		}
		out = append(out, podHosts(sts, ref)...)
	}
	return out, nil
}

// statefulSetNames are the StatefulSets whose changes wake the set.
func statefulSetNames(cs *v1.CredentialSet) []string {
	var out []string
	for _, s := range cs.Spec.Postgres.StatefulSets {
		out = append(out, s.Name)
	}
	return out
}

// added reports an instance that appeared after the phase's instances were
// listed: the phase then runs again over all of them, so that no instance
// a consumer may reach is left out (as for MySQL's StatefulSets).
func added(ctx context.Context, k registry.Kube, cs *v1.CredentialSet, listed []string) (bool, error) {
	now, err := hostsOf(ctx, k, cs.Namespace, cs.Spec.Postgres)
	if err != nil {
		return false, err
	}
	for _, h := range now {
		if !slices.Contains(listed, h) {
			log.FromContext(ctx).Info("an instance was added while the phase ran; running it again over every instance", "instance", h)
			return true, nil
		}
	}
	return false, nil
}

// statefulSetPod matches a StatefulSet pod's address through its headless
// Service: such a host in hosts is the same instance as the pod of a
// StatefulSet another set names.
var statefulSetPod = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)-[0-9]+\.[a-z0-9]([-a-z0-9]*[a-z0-9])?\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?\.?:[0-9]+$`)
