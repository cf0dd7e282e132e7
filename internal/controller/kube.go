package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// setKube is registry.Kube for one set: what its backend may read and
// write, all of it in the set's own namespace besides the list of sets
// (which a backend reads to refuse clashes) and what it reads through the
// live reader where the manager's settings point it.
type setKube struct {
	r  *Reconciler
	cs *v1.CredentialSet
}

func (k *setKube) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return k.r.APIReader.Get(ctx, key, obj, opts...)
}

func (k *setKube) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return k.r.APIReader.List(ctx, list, opts...)
}

func (k *setKube) SecretKey(ctx context.Context, name, key string) (string, error) {
	return k.r.readSecretKey(ctx, k.cs.Namespace, name, key)
}

func (k *setKube) Secret(ctx context.Context, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := k.r.APIReader.Get(ctx, client.ObjectKey{Namespace: k.cs.Namespace, Name: name}, s); err != nil {
		return nil, err
	}
	return s, nil
}

func (k *setKube) StatefulSet(ctx context.Context, name string) (*appsv1.StatefulSet, error) {
	s := &appsv1.StatefulSet{}
	if err := k.r.APIReader.Get(ctx, client.ObjectKey{Namespace: k.cs.Namespace, Name: name}, s); err != nil {
		return nil, err
	}
	return s, nil
}

func (k *setKube) Sets(ctx context.Context) ([]v1.CredentialSet, error) {
	var list v1.CredentialSetList
	if err := k.r.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (k *setKube) Current(ctx context.Context, keys []string) (engine.Secrets, bool, error) {
	src, err := k.r.getSourceSecret(ctx, k.cs)
	if err != nil || src == nil {
		return nil, false, err
	}
	cur, missing := engine.Current(src.Data, keys)
	return cur, len(missing) == 0, nil
}

func (k *setKube) UpdateStatus(ctx context.Context, mutate func(*v1.CredentialSetStatus)) error {
	return k.r.casStatus(ctx, k.cs, mutate)
}

func (k *setKube) Event(typ string, why reason.Reason, action, msg string) {
	k.r.event(k.cs, typ, why, action, "%s", msg)
}

func (k *setKube) Owned(s *corev1.Secret) bool { return ownedBy(s, k.cs) }
func (k *setKube) Claim(s *corev1.Secret)      { claim(s, k.cs) }

func (k *setKube) NotOwned(s *corev1.Secret, role, remedy string) error {
	return notOwned(k.cs, s, role, remedy)
}

func (k *setKube) Fence(ctx context.Context) error {
	if err := k.r.fence(ctx); err != nil {
		return err
	}
	if confirmsStatus(ctx) {
		return k.r.confirmStatus(ctx, k.cs)
	}
	return nil
}
func (k *setKube) FenceTerm() int64 { return k.r.fenceTerm() }

func (k *setKube) HandOver(s *corev1.Secret) string {
	return fmt.Sprintf("`kubectl annotate secret -n %s %s %s=%s`", s.Namespace, s.Name, naming.CredentialSetUIDAnnot, k.cs.UID)
}

func (k *setKube) Create(ctx context.Context, s *corev1.Secret) error {
	return k.r.Client.Create(ctx, s)
}
func (k *setKube) Update(ctx context.Context, s *corev1.Secret) error {
	return k.r.Client.Update(ctx, s)
}
