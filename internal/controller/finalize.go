package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
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

// syncFinalizers makes the set's finalizers match its consumers, for
// backends that delete identities on deletion.
func (r *Reconciler) syncFinalizers(ctx context.Context, cs *v1.CredentialSet, p *plan) error {
	if _, ok := p.backend.(engine.Deprovisioner); !ok {
		return nil
	}
	want := []string{naming.DeprovisionFinalizer}
	for f := range consumerFinalizers(cs) {
		want = append(want, f)
	}
	var next []string
	for _, f := range cs.Finalizers {
		if !isRekeyFinalizer(f) || slices.Contains(want, f) {
			next = append(next, f)
		}
	}
	for _, f := range want {
		if !slices.Contains(next, f) {
			next = append(next, f)
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

// finalize runs when a set with rekey's finalizers is deleted: each
// consumer's finalizer goes once the consumer is gone or no longer
// declared; when none is left, the backend identities are deleted, then
// the source Secret, then the last finalizer. A consumer still there keeps
// everything, and a Warning says which.
func (r *Reconciler) finalize(ctx context.Context, cs *v1.CredentialSet) (ctrl.Result, error) {
	declared := consumerFinalizers(cs)
	var keep, inUse []string
	for _, f := range cs.Finalizers {
		if !strings.HasPrefix(f, naming.ConsumerFinalizerPrefix) {
			keep = append(keep, f)
			continue
		}
		label, ok := declared[f]
		if !ok {
			continue
		}
		gone, err := r.consumerGone(ctx, cs, f)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !gone {
			keep = append(keep, f)
			inUse = append(inUse, label)
		}
	}
	if !slices.Equal(keep, cs.Finalizers) {
		if err := r.patchFinalizers(ctx, cs, keep); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(inUse) > 0 {
		slices.Sort(inUse)
		r.event(cs, "Warning", reason.UsersInUse, "Delete", "the set and its backend identities are kept because %s may still use them: delete those consumers, or remove them from spec.consumers / spec.consumerGroups, and the deletion completes", summarize(inUse, "consumers", "spec.consumers"))
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	if !slices.Contains(cs.Finalizers, naming.DeprovisionFinalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.deprovision(ctx, cs); err != nil {
		var se *errSpec
		rf, refused := engine.AsRefusal(err)
		notOwned := refused && rf.Reason == string(reason.NotOwned)
		if !errors.As(err, &se) && !apierrors.IsNotFound(err) && !notOwned {
			return ctrl.Result{}, err
		}
		// The backend cannot be reached as the spec says (its admin Secret
		// went with the namespace, say): the identities stay, and the set
		// does not block its namespace's deletion forever.
		r.event(cs, "Warning", reason.UsersInUse, "Delete", "the set's backend identities could not be deleted and were left in place: %v; delete them by hand if no one uses them", err)
	}
	return ctrl.Result{}, r.patchFinalizers(ctx, cs, slices.DeleteFunc(slices.Clone(cs.Finalizers), func(f string) bool { return f == naming.DeprovisionFinalizer }))
}

// consumerGone: a workload that no longer exists cannot use anything; a
// group only stops when it is removed from the spec.
func (r *Reconciler) consumerGone(ctx context.Context, cs *v1.CredentialSet, finalizer string) (bool, error) {
	for _, c := range cs.Spec.Consumers {
		ns := consumerNamespace(cs, c)
		if naming.ConsumerFinalizer(c.Kind, ns, c.Name) != finalizer {
			continue
		}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, newWorkload(c.Kind))
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, client.IgnoreNotFound(err)
	}
	return false, nil
}

// deprovision deletes every identity the set holds (current and pending),
// then its source Secret.
func (r *Reconciler) deprovision(ctx context.Context, cs *v1.CredentialSet) error {
	p, err := r.planFor(ctx, cs)
	if err != nil {
		return err
	}
	src, err := r.getSourceSecret(ctx, cs)
	if err != nil {
		return err
	}
	if src != nil {
		keys := p.backend.Keys()
		cur, _ := engine.Current(src.Data, keys)
		// The finalizer that leads here is only added for a Deprovisioner,
		// but a finalizer left by an older manager must not panic this one.
		if d, ok := p.backend.(engine.Deprovisioner); ok {
			if err := d.Deprovision(ctx, cur); err != nil {
				return err
			}
		}
		// Emptied, not deleted: the manager holds no delete permission on
		// Secrets anywhere (least privilege), and nothing secret remains.
		if _, err := r.writeSourceSecret(ctx, cs, src, map[string][]byte{}); err != nil {
			return err
		}
	}
	r.event(cs, "Normal", reason.Deprovisioned, "Delete", "the set's backend identities were deleted and its source Secret %s/%s emptied", r.Namespace, naming.SourceSecretName(cs))
	return nil
}
