package controller

import (
	"context"
	"slices"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
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
