package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/tenancy"
)

// checkNamespaces refuses a set that names a namespace it may not reach
// (the operator's own, or one whose owners have not consented). It runs
// before anything else on every reconcile, so that consent withdrawn stops
// the next write, and nothing — not even provisioning — happens for a set
// that would be refused later.
func (r *Reconciler) checkNamespaces(ctx context.Context, cs *v1.CredentialSet) (*problem, error) {
	reaches := tenancy.Reaches(cs)
	trusted := map[string][]string{}
	for _, ns := range tenancy.Foreign(cs.Namespace, reaches) {
		if ns == r.Namespace {
			continue // never a target, whatever it says
		}
		n := &corev1.Namespace{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Name: ns}, n)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		trusted[ns] = tenancy.Trusted(n.Annotations)
	}
	if d := tenancy.Decide(cs.Namespace, r.Namespace, reaches, trusted); d != nil {
		return &problem{reason.NamespaceNotAllowed, d.Message}, nil
	}
	return nil, nil
}
