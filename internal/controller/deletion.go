package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// deletionStep is what a deleted set with rekey's finalizers does next.
type deletionStep int

const (
	// letGo: rekey's finalizers go at once and nothing else changes
	// (deletionPolicy Retain).
	letGo deletionStep = iota
	// finishRotation: the rotation in flight runs on, through the engine,
	// until it completes or is aborted; none starts. Consumers that were
	// given the new secrets must never be left with secrets the backend
	// no longer accepts, and those still on the old ones must not lose
	// them halfway.
	finishRotation
	// windDown: the policy's backend step, the source Secret emptied, then
	// the finalizer goes.
	windDown
)

// nextDeletionStep decides it. A terminating namespace winds down at once:
// its consumers, Secrets and admin credentials are being deleted with it,
// so a rotation in flight could never complete, and waiting for it would
// hold the namespace forever.
func nextDeletionStep(policy v1.DeletionPolicy, st v1.CredentialSetStatus, namespaceTerminating bool) deletionStep {
	switch {
	case policy == v1.DeletionRetain:
		return letGo
	case engine.RotationInFlight(st) && !namespaceTerminating:
		return finishRotation
	default:
		return windDown
	}
}

// deleted runs a deleted set's next deletion step. finishRotation returns
// handled=false: the caller reconciles the set as usual, the engine
// knowing it is being deleted.
func (r *Reconciler) deleted(ctx context.Context, cs *v1.CredentialSet) (res ctrl.Result, handled bool, err error) {
	if !slices.ContainsFunc(cs.Finalizers, isRekeyFinalizer) {
		return ctrl.Result{}, true, nil
	}
	ns, err := r.namespaceDeletion(ctx, cs.Namespace)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	switch nextDeletionStep(cs.Spec.OnDeletion(), cs.Status, ns.terminating) {
	case letGo:
		return ctrl.Result{}, true, r.release(ctx, cs)
	case finishRotation:
		// The reconcile goes on as usual; load says what the rotation
		// waits for (deletionWaitNote) once it knows the backend.
		return ctrl.Result{}, false, nil
	}
	if !ns.terminating {
		prob, err := r.unaccountedSecond(ctx, cs)
		if err != nil {
			return ctrl.Result{}, true, err
		}
		if prob != nil {
			return r.holdForSecond(ctx, cs, prob)
		}
	}
	res, err = r.finalize(ctx, cs, windDownDeadline(ns, cs.DeletionTimestamp.Time, r.namespaceDeletionTimeout()))
	return res, true, err
}

// deletionWaitNote says what a deleted set's rotation in flight waits for
// and what ends it sooner: abort only while the rotation can still roll
// back (not once its discard began, nor during a rollback), and never when
// noRollback says why it cannot (rollbackBlocked).
func deletionWaitNote(cs *v1.CredentialSet, noRollback string) string {
	st := cs.Status
	const why = "so that no consumer is left with credentials the backend no longer accepts; to let go at once and leave the backend as it is, set spec.deletionPolicy to Retain"
	distributed := st.Phase == v1.PhaseDistributed && cs.Spec.Rotation.DiscardPolicy != v1.DiscardAfterRollout
	switch {
	case st.ResetPending:
		return fmt.Sprintf("the set is deleted while rotation %s is being rolled back: the rollback completes first, once the consumers run the current credentials again, %s", st.LastRolledBackID, why)
	case st.DiscardStarted || st.DiscardApplied:
		return fmt.Sprintf("the set is deleted while rotation %s discards the old credentials: the discard completes first (it cannot roll back any more), %s", st.RotationID, why)
	case noRollback != "" && distributed:
		return fmt.Sprintf("the set is deleted while rotation %s is distributed: it completes when you discard it (kubectl rekey discard %s, once consumers run the new credentials); %s, so it cannot roll back, %s", st.RotationID, cs.Name, noRollback, why)
	case noRollback != "":
		return fmt.Sprintf("the set is deleted while rotation %s is in flight: the rotation completes first (%s, so it may no longer roll back), %s", st.RotationID, noRollback, why)
	case distributed:
		return fmt.Sprintf("the set is deleted while rotation %s is distributed: it completes when you discard it (kubectl rekey discard %s, once consumers run the new credentials) or roll it back (kubectl rekey abort %s), %s", st.RotationID, cs.Name, cs.Name, why)
	}
	return fmt.Sprintf("the set is deleted while rotation %s is in flight: the rotation completes first (or run kubectl rekey abort %s, where it can still roll back), %s", st.RotationID, cs.Name, why)
}

// rollbackBlocked says why the rotation in flight of a deleted set cannot
// roll back, "" when it can: a backend that replaces credentials in place
// (once it applied, or a crash may have come after it did, abort is
// refused), or one that mints its keys and no longer accepts the current
// ones (an abort is refused then: engine.Input.CurrentRefused). Asked only
// where the note would otherwise name abort.
func (r *Reconciler) rollbackBlocked(ctx context.Context, p *plan, cs *v1.CredentialSet, src *corev1.Secret) (string, error) {
	st, tr := cs.Status, p.backend.Traits()
	switch {
	case !tr.Overlap:
		return "it replaces the credentials in place", nil
	case !tr.ReadBack || !engine.Active(st) || st.DiscardStarted || st.DiscardApplied || src == nil:
		return "", nil
	}
	cur, _ := engine.Current(src.Data, p.backend.Keys())
	if why, err := keyRefused(ctx, p.backend, cur); why == "" || err != nil {
		return "", err
	}
	return "the backend no longer accepts the current credentials (changed outside rekey)", nil
}

// release lets go of a set deleted with deletionPolicy Retain: its
// finalizers go, and the backend, its marks and the source Secret stay.
func (r *Reconciler) release(ctx context.Context, cs *v1.CredentialSet) error {
	if engine.RotationInFlight(cs.Status) {
		r.event(cs, "Warning", reason.Retained, "Delete",
			"the set was deleted with deletionPolicy Retain while rotation %s was in flight: rekey changed nothing, so the backend may still accept both the old and the new credentials, and the source Secret keeps both; finish by hand (or recreate the set to adopt them)",
			cs.Status.RotationID)
	} else {
		r.event(cs, "Normal", reason.Retained, "Delete",
			"the set was deleted with deletionPolicy Retain: rekey changed nothing on the backend, and the source Secret stays")
	}
	return r.patchFinalizers(ctx, cs, slices.DeleteFunc(slices.Clone(cs.Finalizers), isRekeyFinalizer))
}

// wantedFinalizers are the finalizers a set's policy asks for: rekey's own
// whatever the policy, since the API server accepts no new finalizer once
// a set is deleted and a policy may be changed right before (Retain lets
// go at once when the set is deleted); with Delete one per declared
// consumer too, which shows what the deletion will wait for.
func wantedFinalizers(cs *v1.CredentialSet) []string {
	switch cs.Spec.OnDeletion() {
	case v1.DeletionDelete:
		want := []string{naming.DeprovisionFinalizer}
		for f := range consumerFinalizers(cs) {
			want = append(want, f)
		}
		slices.Sort(want[1:])
		return want
	}
	return []string{naming.DeprovisionFinalizer}
}

// policyNote says in an Event what the policy left valid.
func policyNote(policy v1.DeletionPolicy) string {
	if policy == v1.DeletionDelete {
		return "the identities rekey created for it were deleted (those it adopted stay, no longer marked as the set's)"
	}
	return "its current credentials stay valid for the consumers that hold them; everything else rekey made for it was removed, and so were its marks on what stays"
}
