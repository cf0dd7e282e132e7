package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// consumerFinalizers maps each declared consumer's finalizer to a label.
func consumerFinalizers(cs *v1.CredentialSet) map[string]string {
	out := map[string]string{}
	for _, c := range cs.Spec.Consumers {
		ns := consumerNamespace(cs, c)
		out[naming.ConsumerFinalizer(c.Kind, ns, c.Name)] = fmt.Sprintf("%s %s/%s", c.Kind, ns, c.Name)
	}
	for _, g := range cs.Spec.ConsumerGroups {
		out[naming.ConsumerFinalizer(v1.KindGroup, "", g.Name)] = "group " + g.Name
	}
	return out
}

// syncFinalizers makes the set's finalizers match its deletion policy and
// consumers. A set being deleted only loses finalizers: the API server
// refuses new ones then.
func (r *Reconciler) syncFinalizers(ctx context.Context, cs *v1.CredentialSet) error {
	want := wantedFinalizers(cs)
	var next []string
	for _, f := range cs.Finalizers {
		if !isRekeyFinalizer(f) || slices.Contains(want, f) {
			next = append(next, f)
		}
	}
	if cs.DeletionTimestamp.IsZero() {
		for _, f := range want {
			if !slices.Contains(next, f) {
				next = append(next, f)
			}
		}
	}
	if slices.Equal(next, cs.Finalizers) {
		return nil
	}
	return r.patchFinalizers(ctx, cs, next)
}

func isRekeyFinalizer(f string) bool {
	return f == naming.DeprovisionFinalizer || strings.HasPrefix(f, naming.ConsumerFinalizerPrefix)
}

func (r *Reconciler) patchFinalizers(ctx context.Context, cs *v1.CredentialSet, finalizers []string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": cs.ResourceVersion, "finalizers": finalizers}})
	if err != nil {
		return err
	}
	return r.Client.Patch(ctx, cs, client.RawPatch(types.MergePatchType, body))
}

// finalize winds a deleted set down per its deletion policy, no rotation
// being in flight. With Delete, each consumer's finalizer goes once the
// consumer is gone or no longer declared, and a consumer still there keeps
// everything (a Warning says which); then the backend step runs, the
// source Secret is emptied, and the last finalizer goes. Past giveUp (set
// only in a namespace being deleted) nothing holds the set any more: a
// consumer still declared makes Delete wind down as Discard, and a
// wind-down that still fails lets go, leaving the backend as it is.
func (r *Reconciler) finalize(ctx context.Context, cs *v1.CredentialSet, giveUp time.Time) (ctrl.Result, error) {
	policy := cs.Spec.OnDeletion()
	overdue := !giveUp.IsZero() && !r.now().Before(giveUp)
	var inUse []string
	if policy == v1.DeletionDelete {
		// Every declared consumer, whether its finalizer was added or not
		// (the policy may have become Delete after the set was deleted).
		var err error
		if inUse, err = r.consumersLeft(ctx, cs); err != nil {
			return ctrl.Result{}, err
		}
		if len(inUse) > 0 && overdue {
			slices.Sort(inUse)
			r.incomplete(cs, "its namespace is being deleted, and %s after the deletion began the set still declared consumers that may use its identities (%s), so it was wound down as with deletionPolicy Discard instead of Delete: the current credentials stay valid for them; delete %s by hand once nothing uses them",
				r.namespaceDeletionTimeout(), summarize(inUse, "consumers", "spec.consumers"), identitiesOf(cs))
			policy, inUse = v1.DeletionDiscard, nil
		}
	}
	declared := consumerFinalizers(cs)
	var keep []string
	for _, f := range cs.Finalizers {
		label, ok := declared[f]
		if strings.HasPrefix(f, naming.ConsumerFinalizerPrefix) && (!ok || !slices.Contains(inUse, label)) {
			continue
		}
		keep = append(keep, f)
	}
	if !slices.Equal(keep, cs.Finalizers) {
		if err := r.patchFinalizers(ctx, cs, keep); err != nil {
			return ctrl.Result{}, err
		}
		cs.Finalizers = keep
	}
	if len(inUse) > 0 {
		slices.Sort(inUse)
		r.repairWhileInUse(ctx, cs)
		r.event(cs, "Warning", reason.UsersInUse, "Delete", "the set and its backend identities are kept because %s may still use them: delete those consumers, or remove them from spec.consumers / spec.consumerGroups, or set spec.deletionPolicy to Discard to keep the current credentials valid, and the deletion completes", summarize(inUse, "consumers", "spec.consumers"))
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	if !slices.Contains(cs.Finalizers, naming.DeprovisionFinalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.windDown(ctx, cs, policy); err != nil {
		var se *errSpec
		rf, refused := engine.AsRefusal(err)
		notOwned := refused && rf.Reason == string(reason.NotOwned)
		switch {
		case apierrors.IsConflict(err):
			return ctrl.Result{}, err // read from an older copy: read again
		case errors.As(err, &se) || apierrors.IsNotFound(err) || notOwned:
			// The backend cannot be reached as the spec says (its admin
			// Secret went with the namespace, say): retrying cannot help.
			r.incomplete(cs, "the set could not be wound down (deletionPolicy %s) and let go: %v; %s. Remove them by hand if no one uses them, then empty the source Secret", policy, err, leftValid(cs, policy))
		case overdue:
			// Its namespace is being deleted: the set must not hold it
			// in Terminating forever.
			r.incomplete(cs, "its namespace is being deleted and winding the set down (deletionPolicy %s) still failed %s after the deletion began, so rekey let go: %v; %s. Remove them by hand once the backend answers, then empty the source Secret", policy, r.namespaceDeletionTimeout(), err, leftValid(cs, policy))
		default:
			why := reason.BackendError
			if refused {
				why = reason.Reason(rf.Reason)
			}
			bound := ""
			if !giveUp.IsZero() {
				bound = fmt.Sprintf(" (its namespace is being deleted: past %s, rekey lets go and leaves the backend as it is)", giveUp.UTC().Format(time.RFC3339))
			}
			r.event(cs, "Warning", why, "Delete", "the deleted set could not be wound down (deletionPolicy %s), so it stays and rekey tries again%s: %v; to let go at once without changing the backend, set spec.deletionPolicy to Retain", policy, bound, err)
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.patchFinalizers(ctx, cs, slices.DeleteFunc(slices.Clone(cs.Finalizers), func(f string) bool { return f == naming.DeprovisionFinalizer }))
}

// consumersLeft names the declared consumers that may still use the set's
// identities: a workload that still exists (one that no longer exists
// cannot use anything), and every group (a group only stops when it is
// removed from the spec).
func (r *Reconciler) consumersLeft(ctx context.Context, cs *v1.CredentialSet) ([]string, error) {
	labels := consumerFinalizers(cs)
	var left []string
	for _, c := range cs.Spec.Consumers {
		ns := consumerNamespace(cs, c)
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, newWorkload(c.Kind))
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		left = append(left, labels[naming.ConsumerFinalizer(c.Kind, ns, c.Name)])
	}
	for _, g := range cs.Spec.ConsumerGroups {
		left = append(left, labels[naming.ConsumerFinalizer(v1.KindGroup, "", g.Name)])
	}
	return left, nil
}

// windDown runs the policy's backend step with the set's current
// secrets, then empties its source Secret.
func (r *Reconciler) windDown(ctx context.Context, cs *v1.CredentialSet, policy v1.DeletionPolicy) error {
	p, err := r.planFor(ctx, cs)
	if err != nil {
		return err
	}
	src, err := r.getSourceSecret(ctx, cs)
	if err != nil {
		return err
	}
	var data map[string][]byte
	// done: rekey emptied the source Secret and gave it up already (a
	// retry after a lost race or a crash); emptied by hand, it is still
	// this set's, and the secrets it held are lost.
	done := src != nil && len(src.Data) == 0 && !ownedBy(src, cs)
	if src != nil {
		data = src.Data
	}
	lost, err := r.windDownBackend(ctx, cs, p.backend, policy, data, done)
	if err != nil {
		return err
	}
	failpoint.Hit("delete/backend-wound-down")
	if src != nil && !done {
		if err := r.emptySourceSecret(ctx, src); err != nil {
			return err
		}
		failpoint.Hit("delete/source-emptied")
	}
	why := reason.Released
	if policy == v1.DeletionDelete {
		why = reason.Deprovisioned
	}
	if lost {
		r.event(cs, "Warning", why, "Delete", "the set was deleted with deletionPolicy %s, but its source Secret %s/%s held none of its current secrets (deleted or emptied by hand, or lost), so rekey left the backend as it was: whatever it made for the set stays, with its marks for this set; a set that later takes over those identities and is refused them as another set's names the mark to remove", policy, r.Namespace, naming.SourceSecretName(cs))
		return nil
	}
	r.event(cs, "Normal", why, "Delete", "the set was deleted with deletionPolicy %s: %s; its source Secret %s/%s was emptied", policy, policyNote(policy), r.Namespace, naming.SourceSecretName(cs))
	return nil
}

// emptySourceSecret empties the source Secret and gives it up (its
// set's UID goes), which tells a retry that the wind-down ran. Emptied,
// not deleted: the manager holds no delete permission on Secrets anywhere
// (least privilege), and nothing secret remains. A set of the same name
// created later claims it again (getSourceSecret).
func (r *Reconciler) emptySourceSecret(ctx context.Context, src *corev1.Secret) error {
	s := src.DeepCopy()
	s.Data = map[string][]byte{}
	delete(s.Annotations, naming.CredentialSetUIDAnnot)
	return r.Client.Update(ctx, s)
}

// windDownBackend runs the backend's part with the set's current secrets.
// The source Secret is emptied only after it ran, so a provisioned set
// whose source Secret rekey emptied (done) has been wound down already (a
// retry after a lost race or a crash): running it again without the
// current secrets could take them from the consumers. Without them (the
// source Secret emptied or deleted by hand), nothing is known to keep,
// and the backend is left as it is: lost. A set never provisioned holds
// nothing anyone uses: whatever rekey made for it may go (a backend that
// mints keys records them before the source Secret exists).
func (r *Reconciler) windDownBackend(ctx context.Context, cs *v1.CredentialSet, b engine.Backend, policy v1.DeletionPolicy, data map[string][]byte, done bool) (lost bool, err error) {
	never := cs.Status.KeyGeneration == 0
	if len(data) == 0 && !never {
		return !done, nil
	}
	cur, err := r.oneSecretLeft(ctx, cs, b, data)
	if err != nil {
		return false, err
	}
	switch {
	case never:
		policy = v1.DeletionDelete
	case len(cur) == 0:
		return true, nil
	}
	if err := r.fence(ctx); err != nil {
		return false, err
	}
	// What follows cannot be undone, so it runs only on the set as it is
	// now: one read from a cache that lags (a new leader's) may predate a
	// rollback or a recovery recorded since, which still needs the source
	// Secret this empties. The patch changes nothing; it is conditional on
	// the resourceVersion read, so it fails on such a copy (a conflict:
	// the set is read again).
	if err := r.patchFinalizers(ctx, cs, cs.Finalizers); err != nil {
		return false, err
	}
	if policy == v1.DeletionDiscard {
		if err := repairBeforeRelease(ctx, b, cur); err != nil {
			return false, err
		}
	}
	return false, backendWindDown(ctx, b, policy, cur)
}

// oneSecretLeft returns the secrets the set's identities hold once no
// rotation is in flight. A rotation is still in flight here only in a
// namespace being deleted, whose consumers go with it: the backend is
// brought back to one secret as a rollback would (Reset to the current
// ones), or, for an in-place rotation that applied and cannot roll back,
// the pending ones are what the backend holds.
func (r *Reconciler) oneSecretLeft(ctx context.Context, cs *v1.CredentialSet, b engine.Backend, data map[string][]byte) (engine.Secrets, error) {
	keys := b.Keys()
	cur, missing := engine.Current(data, keys)
	if !engine.RotationInFlight(cs.Status) || len(missing) > 0 {
		// A reset needs every current secret.
		return cur, nil
	}
	if !b.Traits().Overlap && cs.Status.RotateApplied {
		if engine.InspectPending(data, keys, cs.Status.RotationID) == engine.PendingMatch {
			return engine.Pending(data, keys), nil
		}
		return cur, nil
	}
	if err := r.fence(ctx); err != nil {
		return nil, err
	}
	return cur, b.Reset(ctx, cur)
}

// backendWindDown is the backend's part: Delete deprovisions where the
// backend can tell what rekey created, and releases otherwise; Discard
// releases. A backend with neither keeps nothing but the current secrets
// while no rotation is in flight, and marks nothing.
func backendWindDown(ctx context.Context, b engine.Backend, policy v1.DeletionPolicy, cur engine.Secrets) error {
	if d, ok := b.(engine.Deprovisioner); ok && policy == v1.DeletionDelete {
		return d.Deprovision(ctx, cur)
	}
	if rel, ok := b.(engine.Releaser); ok {
		return rel.Release(ctx, cur)
	}
	return nil
}
