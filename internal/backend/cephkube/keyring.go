package cephkube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/backend/registry"
)

// keyringStore keeps the Ceph admin keyring, and the rotator's, in Secrets
// of the set's namespace, read live and written with optimistic locking.
// The rotator keyring is removed by emptying its key: the manager holds no
// delete permission on Secrets (least privilege), and an empty key means
// "no rotation under way" just as an absent Secret does. The set owns the
// rotator Secret: a rotator keyring rekey did not write for this set is
// never used (it would make rekey recover an admin rotation from a key
// someone else chose) nor overwritten.
type keyringStore struct {
	k         registry.Kube
	namespace string
	ref       v1.SecretKeyRef
}

func (s *keyringStore) LoadAdmin(ctx context.Context) (string, error) {
	return s.k.SecretKey(ctx, s.ref.Name, s.ref.Key)
}

func (s *keyringStore) SaveAdmin(ctx context.Context, keyring string) error {
	return s.put(ctx, s.ref.Name, s.ref.Key, keyring, false)
}

func (s *keyringStore) LoadRotator(ctx context.Context) (string, bool, error) {
	sec, err := s.k.Secret(ctx, ceph.RotatorSecretName(s.ref.Name))
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	v := sec.Data[ceph.RotatorKeyringKey]
	if len(v) > 0 && !s.k.Owned(sec) {
		return "", false, s.rotatorNotOwned(sec)
	}
	return string(v), len(v) > 0, nil
}

func (s *keyringStore) SaveRotator(ctx context.Context, keyring string) error {
	return s.put(ctx, ceph.RotatorSecretName(s.ref.Name), ceph.RotatorKeyringKey, keyring, true)
}

func (s *keyringStore) DeleteRotator(ctx context.Context) error {
	sec, err := s.k.Secret(ctx, ceph.RotatorSecretName(s.ref.Name))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := sec.Data[ceph.RotatorKeyringKey]; !ok {
		return nil
	}
	if !s.k.Owned(sec) {
		return s.rotatorNotOwned(sec)
	}
	delete(sec.Data, ceph.RotatorKeyringKey)
	return s.k.Update(ctx, sec)
}

// put writes key=value into a Secret; create says whether a missing Secret
// may be created (the rotator's) or is an error (the admin's, which the
// user provides).
func (s *keyringStore) put(ctx context.Context, name, key, value string, create bool) error {
	sec, err := s.k.Secret(ctx, name)
	if apierrors.IsNotFound(err) && create {
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: name,
				Annotations: map[string]string{"rekey.io/purpose": "temporary client.admin-rotator keyring of an admin key rotation; emptied when it ends"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{key: []byte(value)},
		}
		s.k.Claim(sec)
		return s.k.Create(ctx, sec)
	}
	if err != nil {
		return fmt.Errorf("read Secret %s/%s: %w", s.namespace, name, err)
	}
	if create && !s.k.Owned(sec) {
		// The rotator Secret is rekey's: claim an empty one (left by a
		// deleted set of the same admin Secret), never one holding a key.
		if len(sec.Data[key]) > 0 {
			return s.rotatorNotOwned(sec)
		}
		s.k.Claim(sec)
	}
	if string(sec.Data[key]) == value {
		return nil
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	sec.Data[key] = []byte(value)
	return s.k.Update(ctx, sec)
}

func (s *keyringStore) rotatorNotOwned(sec *corev1.Secret) error {
	return s.k.NotOwned(sec, "admin rotator Secret", fmt.Sprintf(
		"it holds a keyring rekey did not write; if no admin key rotation of yours is under way, delete it (or empty its %s key); if it is this set's own from a rekey that did not record UIDs, hand it over with %s",
		ceph.RotatorKeyringKey, s.k.HandOver(sec)))
}
