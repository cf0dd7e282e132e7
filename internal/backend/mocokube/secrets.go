package mocokube

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/backend/registry"
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

var _ registry.ExtraSecrets = (*Cluster)(nil)

// secrets, in the order they are written: the controller Secret first,
// since MOCO re-applies the two others from it; written the other way
// round, MOCO could put the old passwords back in between.
func (c *Cluster) secrets() []mocoSecret {
	return []mocoSecret{
		{key: client.ObjectKey{Namespace: c.systemNamespace, Name: c.names.ControllerSecret}, data: moco.UserSecretData, controller: true},
		{key: client.ObjectKey{Namespace: c.namespace, Name: c.names.UserSecret}, data: moco.UserSecretData},
		{key: client.ObjectKey{Namespace: c.namespace, Name: c.names.MyCnfSecret}, data: moco.MyCnfData},
	}
}

// Count: the 3 Secrets MOCO reads.
func (c *Cluster) Count() int { return len(c.secrets()) }

// Stale: some Secret MOCO reads does not hold secrets yet (or is not
// claimed for the set).
func (c *Cluster) Stale(ctx context.Context, secrets engine.Secrets) (bool, error) {
	for _, ms := range c.secrets() {
		s, err := c.get(ctx, ms)
		if err != nil {
			return false, err
		}
		if s == nil {
			continue
		}
		if !c.holds(s, ms, secrets) {
			return true, nil
		}
	}
	return false, nil
}

func (c *Cluster) holds(s *corev1.Secret, ms mocoSecret, secrets engine.Secrets) bool {
	want := moco.Merged(s.Data, ms.data(secrets))
	same := maps.EqualFunc(s.Data, want, func(a, b []byte) bool { return string(a) == string(b) })
	return same && (!ms.controller || s.Annotations[ClaimAnnotation] == string(c.cs.UID))
}

// get reads one of MOCO's Secrets and checks it is MOCO's for this
// cluster; a Secret of the cluster's namespace MOCO has not made (yet) is
// nil: MOCO makes it from the controller Secret, which rekey writes first.
func (c *Cluster) get(ctx context.Context, ms mocoSecret) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := c.k.Get(ctx, ms.key, s); err != nil {
		if apierrors.IsNotFound(err) && !ms.controller {
			return nil, nil
		}
		return nil, err
	}
	if ms.controller {
		if bad := moco.ControllerSecretProblem(s.Labels, s.Annotations, c.namespace, c.cluster); bad != "" {
			return nil, refusal(reason.NotOwned, "Secret %s/%s is not MOCO's controller Secret of this MySQLCluster (%s); rekey does not change it", ms.key.Namespace, ms.key.Name, bad)
		}
		if uid := s.Annotations[ClaimAnnotation]; uid != "" && uid != string(c.cs.UID) {
			return nil, refusal(reason.NotOwned, "MOCO's controller Secret %s/%s is claimed by another CredentialSet (UID %s); rekey does not change it", ms.key.Namespace, ms.key.Name, uid)
		}
		return s, nil
	}
	if owner := metav1.GetControllerOf(s); owner == nil || owner.UID != c.clusterUID {
		return nil, refusal(reason.NotOwned, "Secret %s/%s is not owned by MySQLCluster %s/%s, as MOCO's are, so rekey does not change it: if MOCO did not make it, delete it and MOCO makes its own",
			ms.key.Namespace, ms.key.Name, c.namespace, c.cluster)
	}
	return s, nil
}

// Write gives every Secret MOCO reads the passwords secrets, in the form
// MOCO reads them, keeping what else MOCO put there.
func (c *Cluster) Write(ctx context.Context, secrets engine.Secrets) error {
	for _, ms := range c.secrets() {
		s, err := c.get(ctx, ms)
		if err != nil {
			return err
		}
		if s == nil || c.holds(s, ms, secrets) {
			continue
		}
		s.Data = moco.Merged(s.Data, ms.data(secrets))
		if ms.controller {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[ClaimAnnotation] = string(c.cs.UID)
		}
		if err := c.k.Update(ctx, s); err != nil {
			return fmt.Errorf("update MOCO's Secret %s/%s: %w", ms.key.Namespace, ms.key.Name, err)
		}
	}
	return nil
}
