package mysql

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// StatefulSetInstances are the instances of a StatefulSet-backed cluster:
// one per ordinal below spec.replicas, addressed through the headless
// Service, in ordinal order.
func StatefulSetInstances(sts *appsv1.StatefulSet, ref v1.StatefulSetInstances) []Instance {
	svc := ref.ServiceName
	if svc == "" {
		svc = sts.Spec.ServiceName
	}
	port := ref.PortNumber()
	replicas := int32(1)
	if sts.Spec.Replicas != nil {
		replicas = *sts.Spec.Replicas
	}
	var out []Instance
	for i := range replicas {
		pod := fmt.Sprintf("%s-%d", sts.Name, i)
		out = append(out, Instance{Name: pod, Addr: fmt.Sprintf("%s.%s.%s.svc:%d", pod, svc, sts.Namespace, port)})
	}
	return out
}
