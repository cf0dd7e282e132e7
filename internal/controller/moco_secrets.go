package controller

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/moco"
	"rekey.io/rekey/internal/reason"
)

// mocoSecret is one Secret MOCO reads passwords from, and what it must
// hold for a set of passwords.
type mocoSecret struct {
	key  client.ObjectKey
	data func(map[string]string) map[string][]byte
	// controller: MOCO's own Secret in its namespace (checked by its labels
	// and claimed for the set); the others are owned by the MySQLCluster.
	controller bool
}

// mocoSecrets, in the order they are written: the controller Secret
// first, since MOCO re-applies the two others from it; written the other
// way round, MOCO could put the old passwords back in between.
func (t *mocoTarget) secrets() []mocoSecret {
	return []mocoSecret{
		{key: client.ObjectKey{Namespace: t.systemNamespace, Name: t.names.ControllerSecret}, data: moco.UserSecretData, controller: true},
		{key: client.ObjectKey{Namespace: t.namespace, Name: t.names.UserSecret}, data: moco.UserSecretData},
		{key: client.ObjectKey{Namespace: t.namespace, Name: t.names.MyCnfSecret}, data: moco.MyCnfData},
	}
}

// mocoStale: some Secret MOCO reads does not hold secrets yet (or is not
// claimed for the set).
func (r *Reconciler) mocoStale(ctx context.Context, cs *v1.CredentialSet, t *mocoTarget, secrets engine.Secrets) (bool, error) {
	if t == nil {
		return false, nil
	}
	for _, ms := range t.secrets() {
		s, err := r.mocoGet(ctx, cs, t, ms)
		if err != nil {
			return false, err
		}
		if s == nil {
			continue
		}
		if !mocoHolds(s, ms, cs, secrets) {
			return true, nil
		}
	}
	return false, nil
}

func mocoHolds(s *corev1.Secret, ms mocoSecret, cs *v1.CredentialSet, secrets engine.Secrets) bool {
	want := moco.Merged(s.Data, ms.data(secrets))
	same := maps.EqualFunc(s.Data, want, func(a, b []byte) bool { return string(a) == string(b) })
	return same && (!ms.controller || s.Annotations[MOCOClaimAnnotation] == string(cs.UID))
}

// mocoGet reads one of MOCO's Secrets and checks it is MOCO's for this
// cluster; a Secret of the cluster's namespace MOCO has not made (yet) is
// nil: MOCO makes it from the controller Secret, which rekey writes first.
func (r *Reconciler) mocoGet(ctx context.Context, cs *v1.CredentialSet, t *mocoTarget, ms mocoSecret) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, ms.key, s); err != nil {
		if isNotFound(err) && !ms.controller {
			return nil, nil
		}
		return nil, err
	}
	if ms.controller {
		if bad := moco.ControllerSecretProblem(s.Labels, s.Annotations, t.namespace, t.cluster); bad != "" {
			return nil, mocoRefusal(reason.NotOwned, "Secret %s/%s is not MOCO's controller Secret of this MySQLCluster (%s); rekey does not change it", ms.key.Namespace, ms.key.Name, bad)
		}
		if uid := s.Annotations[MOCOClaimAnnotation]; uid != "" && uid != string(cs.UID) {
			return nil, mocoRefusal(reason.NotOwned, "MOCO's controller Secret %s/%s is claimed by another CredentialSet (UID %s); rekey does not change it", ms.key.Namespace, ms.key.Name, uid)
		}
		return s, nil
	}
	if owner := metav1.GetControllerOf(s); owner == nil || owner.UID != t.clusterUID {
		return nil, mocoRefusal(reason.NotOwned, "Secret %s/%s is not owned by MySQLCluster %s/%s, as MOCO's are, so rekey does not change it: if MOCO did not make it, delete it and MOCO makes its own",
			ms.key.Namespace, ms.key.Name, t.namespace, t.cluster)
	}
	return s, nil
}

// writeMOCO gives every Secret MOCO reads the passwords secrets, in the
// form MOCO reads them, keeping what else MOCO put there.
func (r *Reconciler) writeMOCO(ctx context.Context, cs *v1.CredentialSet, t *mocoTarget, secrets engine.Secrets) error {
	for _, ms := range t.secrets() {
		s, err := r.mocoGet(ctx, cs, t, ms)
		if err != nil {
			return err
		}
		if s == nil || mocoHolds(s, ms, cs, secrets) {
			continue
		}
		s.Data = moco.Merged(s.Data, ms.data(secrets))
		if ms.controller {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[MOCOClaimAnnotation] = string(cs.UID)
		}
		if err := r.Client.Update(ctx, s); err != nil {
			return fmt.Errorf("update MOCO's Secret %s/%s: %w", ms.key.Namespace, ms.key.Name, err)
		}
	}
	return nil
}
