package controller

import (
	"context"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mysql"
)

// instancesAdded reports whether the set now has an instance the plan of
// this reconcile did not list. A phase runs over the instances listed when
// the reconcile began; a StatefulSet scaled up while it ran (issue 20:
// phase 1 takes seconds on a large cluster, more while an instance holds
// it up) has a new pod the phase never saw, whose users may hold only the
// current secrets (CLONEd from a donor before RETAIN). Recording the phase
// as applied then would hand consumers secrets that pod refuses until a
// later reconcile repairs it. The caller runs the phase again instead,
// over the instances as they are now; every phase skips what is done.
// Only a StatefulSet's instances change by themselves; hosts change only
// with the spec, which the reconcile reads anew anyway.
func (r *Reconciler) instancesAdded(ctx context.Context, cs *v1.CredentialSet, p *plan) (bool, error) {
	b, ok := p.backend.(*mysql.Backend)
	if !ok || mysqlInstancesOf(cs).StatefulSet == nil {
		return false, nil
	}
	now, err := r.mysqlInstances(ctx, cs.Namespace, mysqlInstancesOf(cs))
	if err != nil {
		return false, err
	}
	listed := map[string]bool{}
	for _, i := range b.Instances {
		listed[i.Name] = true
	}
	for _, i := range now {
		if !listed[i.Name] {
			logFrom(ctx).Info("an instance was added while the phase ran; running it again over every instance", "instance", i.Name)
			return true, nil
		}
	}
	return false, nil
}
