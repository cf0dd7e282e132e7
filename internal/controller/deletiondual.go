package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// unaccountedSecond asks the backend, before a deleted set with no
// rotation in flight winds down, whether an identity still accepts a
// second secret its status does not account for: a status and source
// Secret restored from a backup taken before a rotation make a set look
// Idle while the backend accepts both that rotation's secrets and the
// previous ones, and consumers may run with either. A wind-down keeps only
// one, so it could lock out whoever holds the other: the set holds instead
// (a problem, nil when there is none), as a rotation does
// (DualPasswordExists), until kubectl rekey recover restarts the
// consumers onto the current secrets and resets the backend to them.
// Only that refusal of the backend's precheck holds, and the health gate's
// (ClusterUnhealthy), which refuses before the backend looks: anything
// else is for the wind-down to meet as before.
func (r *Reconciler) unaccountedSecond(ctx context.Context, cs *v1.CredentialSet) (*problem, error) {
	if cs.Status.KeyGeneration == 0 || engine.RotationInFlight(cs.Status) {
		return nil, nil
	}
	p, err := r.planFor(ctx, cs)
	if err != nil {
		return nil, nil // the wind-down reports it
	}
	src, err := r.getSourceSecret(ctx, cs)
	if err != nil || src == nil || len(src.Data) == 0 {
		return nil, err
	}
	cur, missing := engine.Current(src.Data, p.backend.Keys())
	if len(missing) > 0 {
		return nil, nil
	}
	rf, ok := engine.AsRefusal(p.backend.Precheck(ctx, cur))
	if ok && rf.Reason == string(reason.ClusterUnhealthy) {
		// The health gate refused before the backend looked for a second
		// password (a switchover under way): winding down now would be
		// blind to one. It waits for the roles to settle, as a rotation
		// does.
		return &problem{reason: reason.ClusterUnhealthy, message: fmt.Sprintf(
			"the set is deleted (deletionPolicy %s) but is not wound down yet: %s; it is wound down once the cluster is healthy again, or set spec.deletionPolicy to Retain to let go at once leaving the backend as it is", cs.Spec.OnDeletion(), rf.Message)}, nil
	}
	if !ok || rf.Reason != string(reason.DualPasswordExists) {
		return nil, nil
	}
	// The refusal speaks of a rotation; only the identities it names
	// (never a secret) are kept.
	found, _, _ := strings.Cut(rf.Message, " already has")
	return &problem{reason: reason.DualPasswordExists, message: dualAtDeletionNote(cs, found)}, nil
}

// dualAtDeletionNote names what holds the deletion and its way out.
func dualAtDeletionNote(cs *v1.CredentialSet, found string) string {
	return fmt.Sprintf("the set is deleted (deletionPolicy %s) but is not wound down: the backend accepts a second password that its status does not account for (was the status or the source Secret restored from a backup?), and its consumers may run with either, so keeping one could lock the others out (a second password on %s). To finish, run kubectl rekey recover %s: the consumers restart onto the source Secret's current credentials, every instance is reset to them, then the deletion completes; or set spec.deletionPolicy to Retain to let go leaving both valid",
		cs.Spec.OnDeletion(), found, cs.Name)
}

// holdForSecond is deleted's answer when unaccountedSecond found one: a
// recover request not yet served goes to the usual reconcile (handled
// false), which runs it; otherwise the set reads Degraded with the problem
// (what kubectl rekey recover expects) and is looked at again later. The
// consumers still log in meanwhile, so the hold repairs the instances as
// the wait for consumers does (repairWhileInUse).
func (r *Reconciler) holdForSecond(ctx context.Context, cs *v1.CredentialSet, prob *problem) (ctrl.Result, bool, error) {
	if req := cs.Annotations[engine.RecoverAnnotation]; req != "" && req != cs.Status.LastRecoverID {
		return ctrl.Result{}, false, nil
	}
	r.repairWhileInUse(ctx, cs)
	res, err := r.report(ctx, cs, &observation{}, ctrl.Result{RequeueAfter: 30 * time.Second}, prob, nil)
	return res, true, err
}
