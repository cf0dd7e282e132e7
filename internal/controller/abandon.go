package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// DefaultNamespaceDeletionTimeout is how long a set in a namespace being
// deleted keeps trying to wind down before rekey lets go of it. Outside a
// terminating namespace a failing wind-down is retried for as long as it
// fails: the set is still there to say so, and the user can choose Retain.
// A namespace being deleted is different: nobody may be watching it, and
// a set that never lets go holds the whole namespace in Terminating.
const DefaultNamespaceDeletionTimeout = 10 * time.Minute

// namespaceDeletion is what the set's namespace says about its deletion.
type namespaceDeletion struct {
	terminating bool
	since       time.Time // zero when the namespace is gone already
}

// namespaceDeletion reads ns live: being deleted (or gone already), and
// since when.
func (r *Reconciler) namespaceDeletion(ctx context.Context, ns string) (namespaceDeletion, error) {
	n := &corev1.Namespace{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Name: ns}, n)
	if apierrors.IsNotFound(err) {
		return namespaceDeletion{terminating: true}, nil
	}
	if err != nil {
		return namespaceDeletion{}, err
	}
	d := namespaceDeletion{terminating: !n.DeletionTimestamp.IsZero() || n.Status.Phase == corev1.NamespaceTerminating}
	if n.DeletionTimestamp != nil {
		d.since = n.DeletionTimestamp.Time
	}
	return d, nil
}

// windDownDeadline is when a deleted set stops trying to wind down and lets
// go: only in a namespace being deleted, timeout after the later of the
// namespace's and the set's deletion (a set deleted long before its
// namespace, waiting for a Manual discard say, still gets the whole
// timeout once the namespace goes). Zero: no deadline.
func windDownDeadline(ns namespaceDeletion, setDeleted time.Time, timeout time.Duration) time.Time {
	if !ns.terminating {
		return time.Time{}
	}
	since := setDeleted
	if ns.since.After(since) {
		since = ns.since
	}
	return since.Add(timeout)
}

func (r *Reconciler) namespaceDeletionTimeout() time.Duration {
	if r.NamespaceDeletionTimeout > 0 {
		return r.NamespaceDeletionTimeout
	}
	return DefaultNamespaceDeletionTimeout
}

// leftValid says what a set that let go without winding down left on the
// backend, for the DeletionIncomplete Warning. Nothing of it is secret:
// identities are named, credentials never.
func leftValid(cs *v1.CredentialSet, policy v1.DeletionPolicy) string {
	ids := identitiesOf(cs)
	var what string
	switch {
	case engine.RotationInFlight(cs.Status):
		what = fmt.Sprintf("rotation %s was in flight, so %s may still accept both the old and the new credentials", cs.Status.RotationID, ids)
	case policy == v1.DeletionDelete:
		what = fmt.Sprintf("%s were not deleted and keep every credential they hold", ids)
	default:
		what = fmt.Sprintf("%s keep their current credentials, and any prior generation or leftover of an interrupted rotation rekey made for the set may still be valid, still marked as the set's", ids)
	}
	return fmt.Sprintf("%s; the source Secret keeps the credentials, so that whoever cleans up knows them", what)
}

// identitiesOf names what a set's spec makes rekey manage on its backend;
// the backend's registration words it.
func identitiesOf(cs *v1.CredentialSet) string {
	if e, ok := registry.For(cs); ok && e.Identities != nil {
		return e.Identities(cs)
	}
	return "the set's backend identities"
}

// incomplete emits the DeletionIncomplete Warning twice: on the set, and
// on its source Secret in the operator's namespace. The API server
// refuses new Events in a namespace being deleted, which is exactly when
// a set lets go this way; the operator's namespace keeps the Warning.
func (r *Reconciler) incomplete(cs *v1.CredentialSet, msg string, args ...any) {
	r.event(cs, "Warning", reason.DeletionIncomplete, "Delete", msg, args...)
	if r.Recorder == nil {
		return
	}
	src := &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: r.Namespace, Name: naming.SourceSecretName(cs)}
	set := &corev1.ObjectReference{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet",
		Namespace: cs.Namespace, Name: cs.Name, UID: cs.UID}
	r.Recorder.Eventf(src, set, "Warning", string(reason.DeletionIncomplete), "Delete", "%s",
		EventNote(fmt.Sprintf("CredentialSet %s/%s: ", cs.Namespace, cs.Name)+fmt.Sprintf(msg, args...)))
}
