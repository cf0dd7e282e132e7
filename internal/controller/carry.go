package controller

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// The Secrets a spec only points at (an admin password, a CA: not rekey's,
// so neither labelled for the manager's cache nor watched) are read live,
// once per reconcile (secretMemo). A reconcile that wrote the set wakes
// the next one with that write's own watch event, a moment later; that
// reconcile would read the same Secrets again.
//
// It need not. Such a Secret has no watch: a change to it wakes nothing
// and is seen by whichever reconcile reads it next. The reconcile a write
// wakes, on the very version written (nothing else changed the set), may
// take the reads of the reconcile that wrote: a change made in between is
// then seen by the reconcile after, exactly as if it had been made a
// moment later, and the pass that wrote had used those reads through all
// its steps anyway. A password that no longer works fails that reconcile,
// and a reconcile that failed carries nothing: its retry reads afresh.
//
// What is carried is kept for that one reconcile only, and only in a
// manager wired with its cache (freshReads).

// carried is a reconcile's bootstrap reads, for the reconcile of the set
// at resourceVersion rv.
type carried struct {
	rv      string
	secrets map[types.NamespacedName]*corev1.Secret
}

// carry keeps memo for the reconcile that this manager's last write of the
// set wakes: only after a reconcile that succeeded (a failure may be the
// Secret's fault: the retry reads it again) and wrote the set since it
// read it (read) in a way that wakes it (setUpdateWakes: a write of
// conditions alone wakes nothing, and what runs next, after a backoff or
// a person's change, reads afresh).
func (f *freshReads) carry(read *v1.CredentialSet, succeeded bool, memo map[types.NamespacedName]*corev1.Secret) {
	if f == nil || f.cache == nil {
		return
	}
	set := types.NamespacedName{Namespace: read.Namespace, Name: read.Name}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.carried, set)
	c, ok := f.copies[freshKey{setType, set}].(*v1.CredentialSet)
	if !succeeded || !ok || c.ResourceVersion == read.ResourceVersion || !setUpdateWakes(read, c) || len(memo) == 0 {
		return
	}
	if f.carried == nil {
		f.carried = map[types.NamespacedName]carried{}
	}
	f.carried[set] = carried{rv: c.ResourceVersion, secrets: memo}
}

// takeCarried is what the reconcile before carried for cs, when cs is the
// version that reconcile wrote last; nil otherwise. It is taken once.
func (f *freshReads) takeCarried(cs *v1.CredentialSet) map[types.NamespacedName]*corev1.Secret {
	if f == nil {
		return nil
	}
	set := types.NamespacedName{Namespace: cs.Namespace, Name: cs.Name}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.carried[set]
	delete(f.carried, set)
	if !ok || c.rv != cs.ResourceVersion {
		return nil
	}
	return c.secrets
}

// forgetCarried drops what was kept for a set that is gone.
func (f *freshReads) forgetCarried(set types.NamespacedName) {
	if f == nil {
		return
	}
	f.mu.Lock()
	delete(f.carried, set)
	f.mu.Unlock()
}

// setType is the freshKey kind of a set.
var setType = reflect.TypeOf(&v1.CredentialSet{})

type bootstrapKey struct{}

// withBootstrapMemo starts one reconcile's memory of the bootstrap Secrets
// it reads, from what the reconcile before carried (nil: nothing).
func withBootstrapMemo(ctx context.Context, from map[types.NamespacedName]*corev1.Secret) context.Context {
	if from == nil {
		from = map[types.NamespacedName]*corev1.Secret{}
	}
	return context.WithValue(ctx, bootstrapKey{}, from)
}

// bootstrapMemo is the reconcile's memory (withBootstrapMemo), or a new
// one outside a reconcile.
func bootstrapMemo(ctx context.Context) map[types.NamespacedName]*corev1.Secret {
	if m, ok := ctx.Value(bootstrapKey{}).(map[types.NamespacedName]*corev1.Secret); ok {
		return m
	}
	return map[types.NamespacedName]*corev1.Secret{}
}
