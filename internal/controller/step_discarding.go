package controller

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/metrics"
	"rekey.io/rekey/internal/reason"
)

// discard is step Discarding: every instance stops accepting the old
// secrets (connecting with the new ones), then discardApplied is recorded.
func (r *Reconciler) discard(ctx context.Context, t *turn, auto bool) (ctrl.Result, *problem, error) {
	cs, p, src := t.cs, t.p, t.src
	keys := p.backend.Keys()
	id := cs.Status.RotationID
	cur, _ := engine.Current(src.Data, keys)
	pending := engine.Pending(src.Data, keys)
	if !cs.Status.DiscardStarted {
		if g, ok := p.backend.(engine.DiscardGate); ok {
			// While the cluster is unhealthy or an instance does not
			// answer, nothing is recorded: the rotation may still
			// roll back.
			if err := g.CheckDiscardHealth(ctx, cur, pending); err != nil {
				return ctrl.Result{}, nil, err
			}
		}
		// Every instance must accept the new secrets before the first
		// drops the old ones: one that refuses them (a user changed
		// by hand, IDENTIFIED BY keeping the secondary, which repair
		// takes for applied) would refuse the discard once it began,
		// and then neither abort nor recover could help.
		if err := p.backend.Verify(ctx, pending); err != nil {
			return ctrl.Result{}, nil, err
		}
		// Recorded before the first instance drops anything: an
		// interrupted discard (a crash between instances, an instance
		// lost half way) leaves some instances refusing the old
		// secrets, so from here the only way forward is to finish it.
		if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) { st.DiscardStarted = true }); err != nil {
			return ctrl.Result{}, nil, err
		}
		failpoint.Hit("discard/discard-started")
	}
	if err := r.fence(ctx); err != nil {
		return ctrl.Result{}, nil, err
	}
	if err := p.backend.Retire(ctx, cur, pending); err != nil {
		return ctrl.Result{}, nil, err
	}
	// Likewise a pod added while Retire ran would keep the old
	// secrets valid after Idle (and refuse the next rotation's
	// precheck with DualPasswordExists): Retire again first.
	if added, err := r.instancesAdded(ctx, cs, p); err != nil || added {
		return ctrl.Result{RequeueAfter: time.Second}, nil, err
	}
	if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) { st.DiscardApplied = true }); err != nil {
		return ctrl.Result{}, nil, err
	}
	failpoint.Hit("discard/discard-applied")
	metrics.Retired(cs.Namespace, cs.Name)
	how := "on request"
	if auto {
		how = "by the AfterRollout policy"
	}
	r.stepEvent(cs, id, reason.DiscardApplied, "Discard", "old secrets of rotation %s discarded on every instance (%s)", id, how)
	return ctrl.Result{}, nil, nil
}
