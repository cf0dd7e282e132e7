package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Per-reconcile memory of what the API server already said, so that one
// reconcile does not ask twice. Kept in the context of one reconcile only:
// the next starts from fresh reads (but for what carry.go hands on).

type secretMemoKey struct{}

// withSecretMemo makes readSecretKey remember the Secrets it read under
// ctx, in the reconcile's bootstrap memo (carry.go): for building a plan
// that writes no Secret (MySQL, RabbitMQ, PostgreSQL), where the Secrets a
// spec references (admin password and CA, often one Secret) are read.
// Never around code that writes one: the Ceph plan finishes an interrupted
// admin key rotation, which rewrites the admin keyring Secret that its
// next command reads again.
func withSecretMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, secretMemoKey{}, bootstrapMemo(ctx))
}

func secretMemo(ctx context.Context) map[types.NamespacedName]*corev1.Secret {
	m, _ := ctx.Value(secretMemoKey{}).(map[types.NamespacedName]*corev1.Secret)
	return m
}

type setViewKey struct{}

// setView is the set as the API server last returned it in this
// reconcile: its live read, then each status write's answer. observe
// compares with it instead of reading the set once more; every other
// writer of the set's status would have to get past the same
// (phase, rotationID) test that guards observe's write.
type setView struct{ cs *v1.CredentialSet }

// WithSetView starts the record of the set's server view for one
// reconcile, from its live read.
func withSetView(ctx context.Context, cs *v1.CredentialSet) context.Context {
	return context.WithValue(ctx, setViewKey{}, &setView{cs.DeepCopy()})
}

// serverView is the last server view of the set, nil when none is kept.
func serverView(ctx context.Context) *v1.CredentialSet {
	if v, ok := ctx.Value(setViewKey{}).(*setView); ok && v.cs != nil {
		return v.cs.DeepCopy()
	}
	return nil
}

// noteServerView records what a write of the set returned.
func noteServerView(ctx context.Context, cs *v1.CredentialSet) {
	if v, ok := ctx.Value(setViewKey{}).(*setView); ok {
		v.cs = cs.DeepCopy()
	}
}

type targetMemoKey struct{}

// targetMemo holds the distribution Secrets as this reconcile last read or
// wrote them: a reconcile that serves the current secrets and then, after
// a transition, the new ones reads each target once. Reusing the read is
// safe because every write of a target carries its resourceVersion: a
// change made since is refused as a conflict and retried from fresh reads.
// A nil entry records a target found absent.
type targetMemo map[types.NamespacedName]*corev1.Secret

func withTargetMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, targetMemoKey{}, targetMemo{})
}

// targetMemoOf is the reconcile's memo; nil (remembers nothing) outside one.
func targetMemoOf(ctx context.Context) targetMemo {
	m, _ := ctx.Value(targetMemoKey{}).(targetMemo)
	return m
}

// lookup returns a copy of what the memo holds for key, and whether it
// holds anything.
func (m targetMemo) lookup(key types.NamespacedName) (*corev1.Secret, bool) {
	s, ok := m[key]
	if s != nil {
		s = s.DeepCopy()
	}
	return s, ok
}

// note records s (nil: absent) as the latest server view of key.
func (m targetMemo) note(key types.NamespacedName, s *corev1.Secret) {
	if m == nil {
		return
	}
	if s != nil {
		s = s.DeepCopy()
	}
	m[key] = s
}

// forget drops key: the next use reads it afresh.
func (m targetMemo) forget(key types.NamespacedName) {
	if m != nil {
		delete(m, key)
	}
}
