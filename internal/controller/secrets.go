package controller

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// ownedBy: rekey created s for this very set.
func ownedBy(s *corev1.Secret, cs *v1.CredentialSet) bool {
	return cs.UID != "" && s.Annotations[naming.CredentialSetUIDAnnot] == string(cs.UID)
}

// claim marks s as this set's.
func claim(s *corev1.Secret, cs *v1.CredentialSet) {
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Labels[naming.ManagedByLabel] = naming.ManagedByValue
	s.Annotations[naming.CredentialSetAnnot] = setRef(cs)
	s.Annotations[naming.CredentialSetUIDAnnot] = string(cs.UID)
}

// notOwned refuses to use a Secret rekey did not create for this set.
func notOwned(cs *v1.CredentialSet, s *corev1.Secret, role, remedy string) error {
	return &engine.Refusal{Reason: string(reason.NotOwned), Message: fmt.Sprintf(
		"%s %s/%s exists but was not created by rekey for this CredentialSet (its annotation %s is %q, this set's UID is %s), so rekey neither reads nor changes it: %s",
		role, s.Namespace, s.Name, naming.CredentialSetUIDAnnot, s.Annotations[naming.CredentialSetUIDAnnot], cs.UID, remedy)}
}

func setRef(cs *v1.CredentialSet) string { return cs.Namespace + "/" + cs.Name }

// getSourceSecret reads the source Secret live, or from a cache that holds
// this manager's last write of it (freshReads), never from an older copy: a
// stale read could make rekey mint pending secrets twice, and a backend
// could then accept a secret no Secret holds.
func (r *Reconciler) getSourceSecret(ctx context.Context, cs *v1.CredentialSet) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := r.reads().Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: naming.SourceSecretName(cs)}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !ownedBy(s, cs) {
		if len(s.Data) == 0 {
			// An emptied leftover (a deleted set of the same name) holds
			// nothing to adopt; writeSourceSecret claims it.
			return s, nil
		}
		return nil, notOwned(cs, s, "source Secret", fmt.Sprintf(
			"if it is left over from a deleted set of the same name, delete it; if it holds this set's current secrets (written by a rekey that did not record UIDs), hand it over with `kubectl annotate secret -n %s %s %s=%s`",
			s.Namespace, s.Name, naming.CredentialSetUIDAnnot, cs.UID))
	}
	return s, nil
}

// writeSourceSecret creates the source Secret or updates it under
// optimistic locking, so a concurrent writer makes this fail, not vanish.
func (r *Reconciler) writeSourceSecret(ctx context.Context, cs *v1.CredentialSet, existing *corev1.Secret, data map[string][]byte) (*corev1.Secret, error) {
	if existing == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: naming.SourceSecretName(cs)},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		claim(s, cs)
		return s, r.Client.Create(ctx, s)
	}
	if ownedBy(existing, cs) && maps.EqualFunc(existing.Data, data, func(a, b []byte) bool { return string(a) == string(b) }) {
		return existing, nil
	}
	s := existing.DeepCopy()
	s.Data = data
	claim(s, cs)
	return s, r.Client.Update(ctx, s)
}

// distribute writes what the backend renders for secrets to every target
// Secret, in the target's format. Before it changes what any consumer is
// given, the backend must accept secrets (Verify): a source Secret edited
// by hand is refused there, while consumers keep what works: nobody is
// locked out by a bad edit.
func (r *Reconciler) distribute(ctx context.Context, cs *v1.CredentialSet, p *plan, secrets engine.Secrets, generation int64) error {
	return r.distributeBy(ctx, cs, p.extra, p.backend, secrets, generation)
}

// serve distributes s for a set in turn t, with the current secrets of
// the keys left out of the rotation in flight beside them (turn.served).
func (r *Reconciler) serve(ctx context.Context, t *turn, s engine.Secrets, generation int64) error {
	b, all := t.served(s)
	return r.distributeBy(ctx, t.cs, t.p.extra, b, all, generation)
}

// distributeBy is distribute with backend b rendering and verifying.
func (r *Reconciler) distributeBy(ctx context.Context, cs *v1.CredentialSet, extra registry.ExtraSecrets, b engine.Backend, secrets engine.Secrets, generation int64) error {
	data, err := b.Render(secrets)
	if err != nil {
		return err
	}
	var stale []staleTarget
	for _, t := range cs.Spec.Distribution {
		td, err := targetData(cs, t, data)
		if err != nil {
			return err
		}
		s, ok, err := r.targetCurrent(ctx, cs, t, td, generation)
		if err != nil {
			return err
		}
		if !ok {
			stale = append(stale, staleTarget{t, td, s})
		}
	}
	extraStale := false
	if extra != nil {
		if extraStale, err = extra.Stale(ctx, secrets); err != nil {
			return err
		}
	}
	if len(stale) == 0 && !extraStale {
		return nil
	}
	if err := b.Verify(ctx, secrets); err != nil {
		return err
	}
	// What the targets get was derived from the set's status as read; a
	// read older than the status now (a cache that lags, a manager that
	// stalled) would hand consumers secrets the set has moved past, which a
	// later discard retires under them. No status write guards a Secret
	// write, so the status is tested first.
	if err := r.confirmStatus(ctx, cs); err != nil {
		return err
	}
	// The backend's system first: it must never be behind its consumers.
	if extraStale {
		if err := extra.Write(ctx, secrets); err != nil {
			return err
		}
	}
	for _, st := range stale {
		if err := r.writeTarget(ctx, cs, st, generation); err != nil {
			return err
		}
	}
	return nil
}

// staleTarget is a distribution target to write: its data, and the Secret
// as read (nil: it did not exist).
type staleTarget struct {
	t    v1.SecretTarget
	data map[string][]byte
	read *corev1.Secret
}

// targetCurrent: the target already holds data for generation. It returns
// the Secret it read (nil when there is none), which writeTarget updates:
// a change since is refused by the update's resourceVersion.
func (r *Reconciler) targetCurrent(ctx context.Context, cs *v1.CredentialSet, t v1.SecretTarget, data map[string][]byte, generation int64) (*corev1.Secret, bool, error) {
	key, memo := client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, targetMemoOf(ctx)
	s, known := memo.lookup(key)
	if !known {
		s = &corev1.Secret{}
		err := r.reads().Get(ctx, key, s)
		if apierrors.IsNotFound(err) {
			s = nil
		} else if err != nil {
			return nil, false, err
		}
		memo.note(key, s)
	}
	if s == nil {
		return nil, false, nil
	}
	same := maps.EqualFunc(s.Data, data, func(a, b []byte) bool { return string(a) == string(b) })
	return s, same && s.Annotations[naming.GenerationAnnotation] == fmt.Sprint(generation) &&
		s.Annotations[naming.SecretHashAnnotation] == secretHash(cs, generation) && ownedBy(s, cs), nil
}

// distributionProblem: a race is retried quietly, a refusal or an
// unreachable instance is reported as such, anything else is a
// DistributionFailed problem.
func distributionProblem(ctx context.Context, err error) (*problem, error) {
	if isRace(ctx, err) || apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if _, ok := engine.AsRefusal(err); ok {
		return nil, err
	}
	if _, ok := engine.AsUnreachable(err); ok {
		return nil, err
	}
	return &problem{reason.DistributionFailed, err.Error()}, nil
}

// writeTarget creates or updates a stale target, from the read that found
// it stale (Verify, between the two, may take seconds: an update then
// meets a change made meanwhile as a conflict, retried from a fresh read).
func (r *Reconciler) writeTarget(ctx context.Context, cs *v1.CredentialSet, st staleTarget, generation int64) error {
	key, memo := client.ObjectKey{Namespace: st.t.Namespace, Name: st.t.Name}, targetMemoOf(ctx)
	written, err := r.writeTargetOnce(ctx, cs, st, generation)
	if err != nil {
		// Whatever the server holds now, the next use reads it.
		memo.forget(key)
		return err
	}
	memo.note(key, written)
	return nil
}

// writeTargetOnce is writeTarget's write; it returns the Secret as the
// server now holds it.
func (r *Reconciler) writeTargetOnce(ctx context.Context, cs *v1.CredentialSet, st staleTarget, generation int64) (*corev1.Secret, error) {
	gen, hash := fmt.Sprint(generation), secretHash(cs, generation)
	t, data := st.t, st.data
	if st.read == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name,
				Annotations: map[string]string{naming.GenerationAnnotation: gen, naming.SecretHashAnnotation: hash}},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		claim(s, cs)
		err := r.Client.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) {
			// Another writer created it between the read and the create
			// (another replica, a previous attempt): a lost race, not a
			// failure. Re-read it and go on as if it had been there: it is
			// updated if it is this set's, refused as NotOwned otherwise.
			s = &corev1.Secret{}
			err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, s)
			if err == nil {
				return s, r.updateTarget(ctx, cs, s, data, gen, hash)
			}
		}
		return s, err
	}
	err := r.updateTarget(ctx, cs, st.read, data, gen, hash)
	if apierrors.IsNotFound(err) {
		// Deleted since it was read: created, as a fresh read would have.
		st.read = nil
		return r.writeTargetOnce(ctx, cs, st, generation)
	}
	return st.read, err
}

// updateTarget writes data to an existing distribution Secret s, which
// must be this set's.
func (r *Reconciler) updateTarget(ctx context.Context, cs *v1.CredentialSet, s *corev1.Secret, data map[string][]byte, gen, hash string) error {
	if !ownedBy(s, cs) {
		// Never overwrite what someone else wrote: consumers of that Secret
		// would be handed this set's credentials, and its content lost.
		return notOwned(cs, s, "distribution Secret", fmt.Sprintf(
			"rekey never overwrites a Secret it does not own; delete it (rekey then creates its own), name another Secret in spec.distribution, or hand it over with `kubectl annotate secret -n %s %s %s=%s`",
			s.Namespace, s.Name, naming.CredentialSetUIDAnnot, cs.UID))
	}
	same := maps.EqualFunc(s.Data, data, func(a, b []byte) bool { return string(a) == string(b) })
	if same && s.Annotations[naming.GenerationAnnotation] == gen && s.Annotations[naming.SecretHashAnnotation] == hash {
		return nil
	}
	s.Data = data
	s.Annotations[naming.GenerationAnnotation] = gen
	s.Annotations[naming.SecretHashAnnotation] = hash
	return r.Client.Update(ctx, s)
}

// readSecretKey reads one key of a Secret in the set's namespace, live (a
// referenced Secret carries no rekey label, so it is not in the cache),
// once per plan (withSecretMemo).
func (r *Reconciler) readSecretKey(ctx context.Context, namespace, name, key string) (string, error) {
	memo, ref := secretMemo(ctx), client.ObjectKey{Namespace: namespace, Name: name}
	s := memo[ref]
	if s == nil {
		s = &corev1.Secret{}
		if err := r.APIReader.Get(ctx, ref, s); err != nil {
			return "", fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
		}
		if memo != nil {
			memo[ref] = s
		}
	}
	v, ok := s.Data[key]
	if !ok || len(v) == 0 {
		return "", fmt.Errorf("Secret %s/%s has no key %s", namespace, name, key)
	}
	return string(v), nil
}
