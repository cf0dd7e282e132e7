// Package mocokube reads and writes the Kubernetes objects of a MOCO
// cluster for a CredentialSet with a mysql.moco block: it resolves the
// MySQLCluster into the MySQL spec the set stands for, gates phases on
// MOCO's health, and keeps the Secrets MOCO reads the passwords from. The
// MySQL backend's registration (mysqlkube) calls it; what MOCO's objects
// are named and hold is internal/moco's.
package mocokube

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/moco"
	"rekey.io/rekey/internal/reason"
)

// ClaimAnnotation marks MOCO's controller Secret as rotated by the set
// with this UID: one MySQLCluster, one rotating set.
const ClaimAnnotation = "rekey.io/moco-credential-set-uid"

// Cluster is what one reconcile knows of a moco set's MySQLCluster.
type Cluster struct {
	// Spec is the MySQL spec the set stands for.
	Spec *v1.MySQLSpec
	// Current are the 8 passwords MOCO's controller Secret holds now.
	Current engine.Secrets

	k                  registry.Kube
	cs                 *v1.CredentialSet
	namespace, cluster string
	names              moco.Names
	clusterUID         types.UID
	// systemNamespace holds MOCO's controller Secret.
	systemNamespace string
}

func refusal(why reason.Reason, format string, args ...any) error {
	return &engine.Refusal{Reason: string(why), Message: fmt.Sprintf(format, args...)}
}

var mysqlClusterGVK = schema.GroupVersionKind{Group: moco.Group, Version: "v1beta2", Kind: moco.Kind}

// Resolve reads the set's MySQLCluster and MOCO's controller Secret in
// systemNamespace (the manager's setting), refuses a MOCO that rotates on
// its own, and returns what the set stands for.
func Resolve(ctx context.Context, cs *v1.CredentialSet, k registry.Kube, systemNamespace string) (*Cluster, error) {
	name := cs.Spec.MySQL.MOCO.ClusterName
	if systemNamespace == "" {
		return nil, refusal(reason.MOCONotReady,
			"this rekey installation does not serve MOCO clusters: the operator sets the manager's --moco-namespace (Helm value moco.namespace) to MOCO's namespace, which also grants rekey MOCO's Secrets there")
	}
	c := &Cluster{k: k, cs: cs, namespace: cs.Namespace, cluster: name, names: moco.NamesOf(cs.Namespace, name), systemNamespace: systemNamespace}
	mc, err := c.mysqlCluster(ctx)
	if err != nil {
		return nil, err
	}
	c.clusterUID = mc.GetUID()
	status, _, _ := unstructured.NestedMap(mc.Object, "status")
	var tmpl map[string]string
	if sts, err := k.StatefulSet(ctx, c.names.StatefulSet); err == nil {
		tmpl = sts.Spec.Template.Annotations
	}
	crdFields, err := crdStatusFields(ctx, k)
	if err != nil {
		return nil, err
	}
	if why := moco.OwnRotation(crdFields, slices.Collect(maps.Keys(status)), mc.GetAnnotations(), tmpl); why != "" {
		return nil, refusal(reason.MOCORotatesItself, "%s", why)
	}
	s := &corev1.Secret{}
	if err := k.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: c.names.ControllerSecret}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, refusal(reason.MOCONotReady,
				"MOCO's controller Secret %s/%s does not exist yet (MOCO makes it when it first reconciles the MySQLCluster); rekey goes on once it does",
				systemNamespace, c.names.ControllerSecret)
		}
		return nil, err
	}
	if bad := moco.ControllerSecretProblem(s.Labels, s.Annotations, cs.Namespace, name); bad != "" {
		return nil, refusal(reason.NotOwned,
			"Secret %s/%s is not MOCO's controller Secret of MySQLCluster %s/%s (%s), so rekey neither reads nor changes it: check that --moco-namespace is MOCO's namespace",
			systemNamespace, c.names.ControllerSecret, cs.Namespace, name, bad)
	}
	if uid := s.Annotations[ClaimAnnotation]; uid != "" && uid != string(cs.UID) {
		return nil, refusal(reason.NotOwned,
			"MySQLCluster %s/%s is already rotated by another CredentialSet (UID %s, annotation %s on %s/%s); one cluster's system users rotate in one set: delete this one",
			cs.Namespace, name, uid, ClaimAnnotation, systemNamespace, c.names.ControllerSecret)
	}
	cur, missing := moco.Passwords(s.Data)
	if len(missing) > 0 {
		return nil, refusal(reason.MOCONotReady,
			"MOCO's controller Secret %s/%s lacks %v; rekey adopts all 8 passwords from it and does not start without them",
			systemNamespace, c.names.ControllerSecret, missing)
	}
	c.Current = cur
	c.Spec = moco.DerivedSpec(cs.Spec.MySQL)
	return c, nil
}

// mysqlCluster reads the set's MySQLCluster.
func (c *Cluster) mysqlCluster(ctx context.Context) (*unstructured.Unstructured, error) {
	mc := &unstructured.Unstructured{}
	mc.SetGroupVersionKind(mysqlClusterGVK)
	err := c.k.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.cluster}, mc)
	switch {
	case apimeta.IsNoMatchError(err):
		return nil, refusal(reason.MOCONotReady, "MOCO is not installed in this cluster (no %s resource); rekey follows MOCO %s", moco.CRDName, moco.Version)
	case apierrors.IsNotFound(err):
		return nil, &registry.SpecError{Msg: fmt.Sprintf("MySQLCluster %s/%s named in mysql.moco.clusterName does not exist", c.namespace, c.cluster)}
	}
	return mc, err
}

// crdStatusFields are the status properties the installed MySQLCluster
// CRD declares for the version rekey reads.
func crdStatusFields(ctx context.Context, k registry.Kube) ([]string, error) {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := k.Get(ctx, client.ObjectKey{Name: moco.CRDName}, crd); err != nil {
		return nil, fmt.Errorf("read CRD %s: %w", moco.CRDName, err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var out []string
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		props, _, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema", "properties", "status", "properties")
		out = append(out, slices.Collect(maps.Keys(props))...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
