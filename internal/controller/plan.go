package controller

import (
	"context"
	"maps"

	"rekey.io/rekey/internal/backend/mysql"

	v1 "rekey.io/rekey/api/v1alpha1"
	// Every backend rekey ships registers itself here.
	_ "rekey.io/rekey/internal/backend/all"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
)

// plan is what one reconcile works with: the backend for the set's spec,
// whether it has any instance to act on, and the secrets to adopt at
// provisioning.
type plan struct {
	backend     engine.Backend
	noInstances bool
	adopt       engine.Secrets
	// added reports an instance that appeared since the plan was made
	// (nil: the backend's instances change only with the spec).
	added func(context.Context) (bool, error)
	// moco: the set's MySQLCluster, for a mysql.moco set.
	moco *mocoTarget
}

// errSpec marks a spec problem the user must fix; it is not retried fast.
type errSpec = registry.SpecError

// planFor builds the backend the set's spec selects (registry.For).
func (r *Reconciler) planFor(ctx context.Context, cs *v1.CredentialSet) (*plan, error) {
	if err := checkTargetFormats(cs); err != nil {
		return nil, err
	}
	e, ok := registry.For(cs)
	if !ok {
		return nil, &errSpec{Msg: registry.NoBlock()}
	}
	// A moco set stands for the spec its MySQLCluster implies: MOCO's
	// namespace is the manager's to name, so it is resolved here.
	built, mt := cs, (*mocoTarget)(nil)
	if m := cs.Spec.MySQL; m != nil && m.MOCO != nil {
		spec, t, err := r.mocoResolve(ctx, cs)
		if err != nil {
			return nil, err
		}
		built, mt = cs.DeepCopy(), t
		built.Spec.MySQL = spec
	}
	opts := registry.Options{InstanceConcurrency: r.InstanceConcurrency, AddressMap: r.AddressMap,
		CephCLI: r.CephCLI, CephWorkDir: r.CephWorkDir}
	bctx := ctx
	if e.WritesNoSecret {
		bctx = withSecretMemo(ctx) // each Secret the plan needs is read once
	}
	p, err := e.Build(bctx, built, &setKube{r: r, cs: cs}, opts)
	if err != nil {
		return nil, err
	}
	if mt != nil {
		// All 8 from MOCO's own Secret, the admin's included.
		if cs.Status.KeyGeneration == 0 {
			p.Adopt = maps.Clone(mt.current)
		}
		if b, ok := p.Backend.(*mysql.Backend); ok {
			b.Gate = r.mocoGate(mt)
		}
	}
	return &plan{backend: p.Backend, noInstances: p.NoInstances, adopt: p.Adopt, added: p.InstancesAdded, moco: mt}, nil
}

// instancesAdded reports whether the set now has an instance the plan of
// this reconcile did not list: a phase that ran over the old list is then
// run again over every instance (each phase skips what is done), rather
// than recorded as applied while a new instance refuses its secrets.
func (r *Reconciler) instancesAdded(ctx context.Context, _ *v1.CredentialSet, p *plan) (bool, error) {
	if p.added == nil {
		return false, nil
	}
	return p.added(ctx)
}
