package controller

import (
	"context"

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
	// extra: Secrets the backend's system reads, kept with the
	// distribution (nil: none).
	extra registry.ExtraSecrets
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
	opts := registry.Options{InstanceConcurrency: r.InstanceConcurrency, AddressMap: r.AddressMap, Settings: r.Settings}
	bctx := ctx
	if e.WritesNoSecret {
		bctx = withSecretMemo(ctx) // each Secret the plan needs is read once
	}
	p, err := e.Build(bctx, cs, &setKube{r: r, cs: cs}, opts)
	if err != nil {
		return nil, err
	}
	return &plan{backend: p.Backend, noInstances: p.NoInstances, adopt: p.Adopt, added: p.InstancesAdded, extra: p.Extra}, nil
}

// distributionCount is how many Secrets the set's secrets are written to:
// its distribution targets and the backend's extra Secrets.
func distributionCount(cs *v1.CredentialSet, p *plan) int {
	n := len(cs.Spec.Distribution)
	if p.extra != nil {
		n += p.extra.Count()
	}
	return n
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
