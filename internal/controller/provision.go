package controller

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// provision creates generation 1: secrets rekey mints are stored in the
// source Secret first, then made to exist everywhere; secrets the backend
// mints are read back from it and stored after. Then they are distributed.
func (r *Reconciler) provision(ctx context.Context, cs *v1.CredentialSet, p *plan, src *corev1.Secret) error {
	keys := p.backend.Keys()
	traits := p.backend.Traits()
	var data map[string][]byte
	if src != nil {
		data = src.Data
	}
	cur, missing := engine.Current(data, keys)
	if len(missing) > 0 && !traits.ReadBack {
		fresh, err := p.backend.NewSecrets(1)
		if err != nil {
			return err
		}
		next := maps.Clone(data)
		if next == nil {
			next = map[string][]byte{}
		}
		for _, k := range missing {
			v, ok := p.adopt[k]
			if !ok {
				v = fresh[k]
			}
			next[k] = []byte(v)
			cur[k] = v
		}
		if src, err = r.writeSourceSecret(ctx, cs, src, next); err != nil {
			return err
		}
		failpoint.Hit("provision/source-stored")
	}
	if p.noInstances {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: "no instances to create users on (replicas: 0): scale the cluster up"}
	}
	if err := r.fence(ctx); err != nil {
		return err
	}
	got, err := p.backend.Provision(ctx, cur)
	if err != nil {
		return err
	}
	cur = got.Secrets
	if traits.ReadBack {
		next := maps.Clone(data)
		if next == nil {
			next = map[string][]byte{}
		}
		for k, v := range cur {
			next[k] = []byte(v)
		}
		if _, err := r.writeSourceSecret(ctx, cs, src, next); err != nil {
			return err
		}
		failpoint.Hit("provision/source-stored")
	}
	if err := r.distribute(ctx, cs, p, cur, max(got.Generation, 1)); err != nil {
		if prob, err := distributionProblem(ctx, err); prob == nil {
			return err
		}
		return &engine.Refusal{Reason: string(reason.DistributionFailed), Message: err.Error()}
	}
	version, err := p.backend.Version(ctx, cur)
	if err != nil {
		return err
	}
	if got.Adopted {
		// Keys rekey found rather than minted: nobody knows which version
		// minted them, so WithVersionUpgrade replaces them (as Rook does).
		version = ""
	}
	priors, err := priorCount(ctx, p, cur)
	if err != nil {
		return err
	}
	now := metav1.NewTime(r.now())
	if err := r.casStatus(ctx, cs, func(st *v1.CredentialSetStatus) {
		st.KeyGeneration, st.KeyVersion, st.PriorKeyCount = max(got.Generation, 1), version, priors
		st.CurrentSince = &now
		if st.Phase == v1.PhasePending {
			st.Phase = v1.PhaseIdle
		}
	}); err != nil {
		return err
	}
	r.event(cs, "Normal", reason.Provisioned, "Provision", "generation %d provisioned for %d identities and distributed to %d Secrets (step %s)", cs.Status.KeyGeneration, len(keys), distributionCount(cs, p), engine.StepOf(cs.Status))
	return nil
}

// priorCount is status.priorKeyCount: read from backends that keep prior
// generations, absent for the others.
func priorCount(ctx context.Context, p *plan, cur engine.Secrets) (*int32, error) {
	inv, ok := p.backend.(engine.Inventory)
	if !ok {
		return nil, nil
	}
	n, err := inv.Priors(ctx, cur)
	if err != nil {
		return nil, err
	}
	c := int32(n)
	return &c, nil
}
