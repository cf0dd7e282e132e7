package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/moco"
	"rekey.io/rekey/internal/reason"
)

// MOCOClaimAnnotation marks MOCO's controller Secret as rotated by the
// set with this UID: one MySQLCluster, one rotating set.
const MOCOClaimAnnotation = "rekey.io/moco-credential-set-uid"

// mocoTarget is what one reconcile knows of a moco set's MySQLCluster.
type mocoTarget struct {
	namespace, cluster string
	names              moco.Names
	clusterUID         types.UID
	// systemNamespace holds MOCO's controller Secret.
	systemNamespace string
	// current are the 8 passwords MOCO's controller Secret holds now.
	current engine.Secrets
}

// distributionCount is how many Secrets a set writes its secrets to: its
// distribution targets, and the 3 Secrets MOCO reads for a moco set.
func distributionCount(cs *v1.CredentialSet) int {
	n := len(cs.Spec.Distribution)
	if m := cs.Spec.MySQL; m != nil && m.MOCO != nil {
		n += 3
	}
	return n
}

func mocoRefusal(why reason.Reason, format string, args ...any) error {
	return &engine.Refusal{Reason: string(why), Message: fmt.Sprintf(format, args...)}
}

var mysqlClusterGVK = schema.GroupVersionKind{Group: moco.Group, Version: "v1beta2", Kind: moco.Kind}

// mocoResolve reads the set's MySQLCluster and MOCO's controller Secret,
// refuses a MOCO that rotates on its own, and returns the spec the set
// stands for.
func (r *Reconciler) mocoResolve(ctx context.Context, cs *v1.CredentialSet) (*v1.MySQLSpec, *mocoTarget, error) {
	name := cs.Spec.MySQL.MOCO.ClusterName
	if r.MOCONamespace == "" {
		return nil, nil, mocoRefusal(reason.MOCONotReady,
			"this rekey installation does not serve MOCO clusters: the operator sets the manager's --moco-namespace (Helm value moco.namespace) to MOCO's namespace, which also grants rekey MOCO's Secrets there")
	}
	t := &mocoTarget{namespace: cs.Namespace, cluster: name, names: moco.NamesOf(cs.Namespace, name), systemNamespace: r.MOCONamespace}
	mc, err := r.getMySQLCluster(ctx, cs.Namespace, name)
	if err != nil {
		return nil, nil, err
	}
	t.clusterUID = mc.GetUID()
	status, _, _ := unstructured.NestedMap(mc.Object, "status")
	sts := &unstructured.Unstructured{}
	sts.SetAPIVersion("apps/v1")
	sts.SetKind("StatefulSet")
	var tmpl map[string]string
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cs.Namespace, Name: t.names.StatefulSet}, sts); err == nil {
		tmpl, _, _ = unstructured.NestedStringMap(sts.Object, "spec", "template", "metadata", "annotations")
	}
	crdFields, err := r.mocoCRDStatusFields(ctx)
	if err != nil {
		return nil, nil, err
	}
	if why := moco.OwnRotation(crdFields, slices.Collect(maps.Keys(status)), mc.GetAnnotations(), tmpl); why != "" {
		return nil, nil, mocoRefusal(reason.MOCORotatesItself, "%s", why)
	}
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.systemNamespace, Name: t.names.ControllerSecret}, s); err != nil {
		if isNotFound(err) {
			return nil, nil, mocoRefusal(reason.MOCONotReady,
				"MOCO's controller Secret %s/%s does not exist yet (MOCO makes it when it first reconciles the MySQLCluster); rekey goes on once it does",
				t.systemNamespace, t.names.ControllerSecret)
		}
		return nil, nil, err
	}
	if bad := moco.ControllerSecretProblem(s.Labels, s.Annotations, cs.Namespace, name); bad != "" {
		return nil, nil, mocoRefusal(reason.NotOwned,
			"Secret %s/%s is not MOCO's controller Secret of MySQLCluster %s/%s (%s), so rekey neither reads nor changes it: check that --moco-namespace is MOCO's namespace",
			t.systemNamespace, t.names.ControllerSecret, cs.Namespace, name, bad)
	}
	if uid := s.Annotations[MOCOClaimAnnotation]; uid != "" && uid != string(cs.UID) {
		return nil, nil, mocoRefusal(reason.NotOwned,
			"MySQLCluster %s/%s is already rotated by another CredentialSet (UID %s, annotation %s on %s/%s); one cluster's system users rotate in one set: delete this one",
			cs.Namespace, name, uid, MOCOClaimAnnotation, t.systemNamespace, t.names.ControllerSecret)
	}
	cur, missing := moco.Passwords(s.Data)
	if len(missing) > 0 {
		return nil, nil, mocoRefusal(reason.MOCONotReady,
			"MOCO's controller Secret %s/%s lacks %v; rekey adopts all 8 passwords from it and does not start without them",
			t.systemNamespace, t.names.ControllerSecret, missing)
	}
	t.current = cur
	return moco.DerivedSpec(cs.Spec.MySQL), t, nil
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

func (r *Reconciler) getMySQLCluster(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	mc := &unstructured.Unstructured{}
	mc.SetGroupVersionKind(mysqlClusterGVK)
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, mc)
	switch {
	case apimeta.IsNoMatchError(err):
		return nil, mocoRefusal(reason.MOCONotReady, "MOCO is not installed in this cluster (no %s resource); rekey follows MOCO %s", moco.CRDName, moco.Version)
	case isNotFound(err):
		return nil, &errSpec{Msg: fmt.Sprintf("MySQLCluster %s/%s named in mysql.moco.clusterName does not exist", namespace, name)}
	}
	return mc, err
}

// mocoCRDStatusFields are the status properties the installed
// MySQLCluster CRD declares for the version rekey reads.
func (r *Reconciler) mocoCRDStatusFields(ctx context.Context) ([]string, error) {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: moco.CRDName}, crd); err != nil {
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

// gate is the set's health gate beyond the instances' own: MOCO's
// conditions before a rotation or discard starts, and, before a discard,
// no backup Job of the cluster running (it holds the BACKUP_PASSWORD it
// read when it started).
func (r *Reconciler) mocoGate(t *mocoTarget) func(ctx context.Context, discard bool) error {
	return func(ctx context.Context, discard bool) error {
		mc, err := r.getMySQLCluster(ctx, t.namespace, t.cluster)
		if err != nil {
			return err
		}
		raw, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
		var conds []metav1.Condition
		for _, c := range raw {
			cm, _ := c.(map[string]any)
			var cond metav1.Condition
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cm, &cond); err == nil {
				conds = append(conds, cond)
			}
		}
		if why := moco.Health(conds); why != "" {
			return mocoRefusal(reason.ClusterUnhealthy, "%s", why)
		}
		if !discard {
			return nil
		}
		var jobs batchv1.JobList
		if err := r.APIReader.List(ctx, &jobs, client.InNamespace(t.namespace)); err != nil {
			return err
		}
		for _, j := range jobs.Items {
			owner := metav1.GetControllerOf(&j)
			if owner != nil && owner.Kind == "CronJob" && owner.Name == t.names.BackupCronJob && j.Status.Active > 0 {
				return mocoRefusal(reason.DiscardRefused,
					"MOCO's backup Job %s/%s is running with the backup password it read when it started; the discard waits until it ends and goes on by itself",
					t.namespace, j.Name)
			}
		}
		return nil
	}
}
