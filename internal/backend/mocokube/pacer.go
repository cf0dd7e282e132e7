package mocokube

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/moco"
)

// MOCO paces the rollout of a cluster's StatefulSet (moco.PacedBy): the
// controller judges a consumer's rollout MOCO holds by its cluster's
// Healthy condition, whatever set the consumer belongs to.
func init() { registry.RegisterPacer(Pacer) }

// Pacer is MOCO as an operator that paces rollouts.
var Pacer = registry.Pacer{
	Name: "MOCO",
	Owner: func(sts *appsv1.StatefulSet) (string, string) {
		return moco.Kind, moco.PacedBy(sts)
	},
	Health:    health,
	Condition: moco.CondHealthy,
	Diagnose:  "kubectl moco status, the MySQLCluster's conditions, the pods that are not ready",
}

// health reads the Healthy condition of MySQLCluster ns/name, live.
func health(ctx context.Context, r client.Reader, ns, name string) registry.OwnerHealth {
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion(moco.APIVersion)
	mc.SetKind(moco.Kind)
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mc); err != nil {
		log.FromContext(ctx).V(1).Info("MySQLCluster not readable; its rollout is judged without its health", "namespace", ns, "name", name, "error", err.Error())
		return registry.OwnerHealth{}
	}
	c := moco.HealthyCondition(moco.Conditions(mc.Object))
	if c == nil {
		return registry.OwnerHealth{}
	}
	return registry.OwnerHealth{Known: true, Healthy: c.Status == metav1.ConditionTrue, Reason: c.Reason, Since: c.LastTransitionTime.Time}
}
