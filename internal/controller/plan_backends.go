package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/backend/rabbitmq"
	"rekey.io/rekey/internal/reason"
)

// cephPlan builds the Ceph backend. Before any other Ceph command it
// resolves an interrupted admin key rotation (seed 001 "In CephCluster
// startup"): until then the admin keyring Secret may hold a dead key.
func (r *Reconciler) cephPlan(ctx context.Context, cs *v1.CredentialSet) (*plan, error) {
	spec := cs.Spec.Ceph
	store := &secretKeyringStore{r: r, namespace: cs.Namespace, ref: spec.Admin.KeyringSecretRef, set: cs}
	b, err := ceph.New(spec, store, r.CephCLI)
	if err != nil {
		return nil, &errSpec{err.Error()}
	}
	b.WorkDir = r.CephWorkDir
	b.Owner = ceph.Owner{UID: string(cs.UID), Set: cs.Namespace + "/" + cs.Name}
	b.Report = func(why reason.Reason, msg string) {
		typ := "Normal"
		if why == reason.AdminRotationFailed {
			typ = "Warning"
		}
		r.event(cs, typ, why, "Ceph", "%s", msg)
	}
	if _, err := b.RecoverAdmin(ctx); err != nil {
		return nil, err
	}
	if err := r.removeUnusedKeys(ctx, cs, b); err != nil {
		return nil, err
	}
	return &plan{backend: b}, nil
}

// removeUnusedKeys deletes the listed bootstrap keys once, and records it
// (seed 001 "Unused keys"); listing a key again later re-checks it.
func (r *Reconciler) removeUnusedKeys(ctx context.Context, cs *v1.CredentialSet, b *ceph.Backend) error {
	want := cs.Spec.Ceph.RemoveUnusedKeys
	var todo []string
	for _, k := range want {
		if !slices.Contains(cs.Status.UnusedKeysRemoved, k) {
			todo = append(todo, k)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	removed, err := b.RemoveUnusedKeys(ctx, todo)
	if err != nil {
		return err
	}
	if len(removed) > 0 {
		r.event(cs, "Normal", reason.UnusedKeysRemoved, "Ceph", "removed unused keys %v (seed 001: Ceph creates them, nothing uses them)", removed)
	}
	done := append(slices.Clone(cs.Status.UnusedKeysRemoved), todo...)
	slices.Sort(done)
	return r.casStatus(ctx, cs, func(st *v1.CredentialSetStatus) { st.UnusedKeysRemoved = slices.Compact(done) })
}

// rabbitPlan builds the RabbitMQ backend from the admin Secret.
func (r *Reconciler) rabbitPlan(ctx context.Context, cs *v1.CredentialSet) (*plan, error) {
	spec := cs.Spec.RabbitMQ
	if err := r.uniqueRabbitBase(ctx, cs); err != nil {
		return nil, err
	}
	ref := spec.Admin
	userKey, pwKey := ref.UsernameKey, ref.PasswordKey
	if userKey == "" {
		userKey = "username"
	}
	if pwKey == "" {
		pwKey = "password"
	}
	user, err := r.readSecretKey(ctx, cs.Namespace, ref.SecretRef.Name, userKey)
	if err != nil {
		return nil, err
	}
	password, err := r.readSecretKey(ctx, cs.Namespace, ref.SecretRef.Name, pwKey)
	if err != nil {
		return nil, err
	}
	var ca []byte
	if spec.TLS != nil && spec.TLS.CASecretRef != nil {
		pem, err := r.readSecretKey(ctx, cs.Namespace, spec.TLS.CASecretRef.Name, spec.TLS.CASecretRef.Key)
		if err != nil {
			return nil, err
		}
		ca = []byte(pem)
	}
	// The set's UID marks every user rekey creates for it: users without it
	// (another set's, another tenant's) are never changed or deleted.
	b, err := rabbitmq.New(spec, string(cs.UID), user, password, ca)
	if err != nil {
		return nil, &errSpec{err.Error()}
	}
	return &plan{backend: b}, nil
}

// uniqueRabbitBase refuses two sets rotating the same user base on one
// broker: each would take the other's generations for orphans and delete
// them.
func (r *Reconciler) uniqueRabbitBase(ctx context.Context, cs *v1.CredentialSet) error {
	var list v1.CredentialSetList
	if err := r.Client.List(ctx, &list); err != nil {
		return err
	}
	norm := func(e string) string { return strings.ToLower(strings.TrimRight(e, "/")) }
	me := cs.Spec.RabbitMQ
	for _, o := range list.Items {
		if o.UID == cs.UID || o.Spec.RabbitMQ == nil || o.Spec.RabbitMQ.User.Base != me.User.Base ||
			norm(o.Spec.RabbitMQ.Endpoint) != norm(me.Endpoint) {
			continue
		}
		return &errSpec{fmt.Sprintf("CredentialSet %s/%s already rotates user base %q on %s: two sets would delete each other's users; give this set another rabbitmq.user.base",
			o.Namespace, o.Name, me.User.Base, me.Endpoint)}
	}
	return nil
}
