package moco

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MOCO's MySQLCluster condition types (api/v1beta2).
const (
	CondAvailable            = "Available"
	CondHealthy              = "Healthy"
	CondReconciliationActive = "ReconciliationActive"
	CondClusteringActive     = "ClusteringActive"
)

// Health decides whether MOCO reports the cluster fit for a phase to
// start: Healthy and Available True (MOCO sets both from its clustering
// loop), and neither reconciliation nor clustering stopped by a user
// (kubectl moco stop ...), since MOCO's view is then stale. It returns
// "" when fit, else why not and what ends the wait.
func Health(conds []metav1.Condition) string {
	find := func(typ string) *metav1.Condition {
		for i := range conds {
			if conds[i].Type == typ {
				return &conds[i]
			}
		}
		return nil
	}
	for _, typ := range []string{CondReconciliationActive, CondClusteringActive} {
		if c := find(typ); c != nil && c.Status == metav1.ConditionFalse {
			return fmt.Sprintf("MOCO's %s is False (reason %s): MOCO does not manage the cluster now; resume it (kubectl moco start) and rekey goes on by itself", typ, c.Reason)
		}
	}
	for _, typ := range []string{CondHealthy, CondAvailable} {
		c := find(typ)
		if c == nil {
			return fmt.Sprintf("MOCO has not reported the condition %s of the MySQLCluster yet; rekey starts once MOCO reports it True", typ)
		}
		if c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("MOCO reports %s=%s (reason %s) for the MySQLCluster; rekey starts by itself once MOCO reports it True", typ, c.Status, c.Reason)
		}
	}
	return ""
}

// Rotation markers of a MOCO that rotates its system users itself (the
// design of MOCO's own rotation: status.systemUserRotation and these
// annotations). MOCO Version has none of them.
const (
	OwnRotationStatusField = "systemUserRotation"
	OwnRotateAnnotation    = "moco.cybozu.com/password-rotate"
	OwnDiscardAnnotation   = "moco.cybozu.com/password-discard"
	OwnRestartAnnotation   = "moco.cybozu.com/password-rotation-restart"
)

// OwnRotation says why MOCO rotates the system users itself, or "": its
// CRD's status schema (crdStatusFields, the installed CRD's property
// names), the cluster's status fields or annotations, or the
// StatefulSet's pod template annotations carry its rotation. Two rotators
// of the same users would each RETAIN and DISCARD the other's password.
func OwnRotation(crdStatusFields, statusFields []string, clusterAnnotations, templateAnnotations map[string]string) string {
	var found []string
	if slices.Contains(crdStatusFields, OwnRotationStatusField) {
		found = append(found, "its MySQLCluster CRD has status."+OwnRotationStatusField)
	}
	if slices.Contains(statusFields, OwnRotationStatusField) {
		found = append(found, "the MySQLCluster's status has "+OwnRotationStatusField)
	}
	for _, a := range []string{OwnRotateAnnotation, OwnDiscardAnnotation} {
		if _, ok := clusterAnnotations[a]; ok {
			found = append(found, "the MySQLCluster is annotated "+a)
		}
	}
	if _, ok := templateAnnotations[OwnRestartAnnotation]; ok {
		found = append(found, "its StatefulSet's pods are annotated "+OwnRestartAnnotation)
	}
	if len(found) == 0 {
		return ""
	}
	return "this MOCO rotates the system users' passwords itself (" + strings.Join(found, "; ") +
		"), and two rotators of one user lock each other out: rekey does nothing on this cluster. Use MOCO's own rotation (kubectl moco credential rotate) and delete this CredentialSet, or run a MOCO without it (rekey follows MOCO " + Version + ")"
}

// ControllerSecretProblem checks that a Secret found under MOCO's
// controller Secret name is MOCO's, for cluster in namespace: MOCO's
// labels naming them and its secret-version annotation. It returns what
// is wrong, or "".
func ControllerSecretProblem(labels, annotations map[string]string, namespace, cluster string) string {
	want := map[string]string{LabelCreatedBy: CreatedBy, LabelInstance: cluster, LabelInstanceNamespace: namespace}
	var bad []string
	for _, k := range []string{LabelCreatedBy, LabelInstance, LabelInstanceNamespace} {
		if labels[k] != want[k] {
			bad = append(bad, fmt.Sprintf("label %s is %q, not %q", k, labels[k], want[k]))
		}
	}
	if annotations[SecretVersionAnnotation] != SecretVersion {
		bad = append(bad, fmt.Sprintf("annotation %s is %q, not %q", SecretVersionAnnotation, annotations[SecretVersionAnnotation], SecretVersion))
	}
	return strings.Join(bad, ", ")
}
