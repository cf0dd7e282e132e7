package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// cephPlan builds the Ceph backend. Before any other Ceph command it
// resolves an interrupted admin key rotation, as the first thing after a
// restart: until then the admin keyring Secret may hold a dead key.
func (r *Reconciler) cephPlan(ctx context.Context, cs *v1.CredentialSet) (*plan, error) {
	spec := cs.Spec.Ceph
	store := &secretKeyringStore{r: r, namespace: cs.Namespace, ref: spec.Admin.KeyringSecretRef, set: cs}
	b, err := ceph.New(spec, store, r.CephCLI)
	if err != nil {
		return nil, &errSpec{err.Error()}
	}
	if err := r.uniqueCephEntities(ctx, cs); err != nil {
		return nil, err
	}
	b.WorkDir = r.CephWorkDir
	b.InitialGeneration = engine.InitialGeneration(cs.Spec.Rotation)
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
	if err := r.trimPriors(ctx, cs, b); err != nil {
		return nil, err
	}
	if err := r.checkCaps(ctx, cs, b); err != nil {
		return nil, err
	}
	return &plan{backend: b}, nil
}

// capsCheckedAt ends the CapsMatch message: which key generation the caps
// were compared at.
func capsCheckedAt(keyGeneration int64) string {
	return fmt.Sprintf("(checked at key generation %d)", keyGeneration)
}

// capsCheckDue: an idle, provisioned set whose caps were not compared yet
// for this spec and this key generation. Comparing once per change (one
// `ceph auth ls`) catches what a spec edit or a rotation can change;
// caps edited in the cluster by hand are seen at the next rotation.
func capsCheckDue(cs *v1.CredentialSet) bool {
	st := cs.Status
	if !cs.DeletionTimestamp.IsZero() || st.Phase != v1.PhaseIdle || st.ResetPending || st.KeyGeneration == 0 {
		return false
	}
	c := meta.FindStatusCondition(st.Conditions, reason.CondCapsMatch)
	return c == nil || c.ObservedGeneration != cs.Generation || !strings.HasSuffix(c.Message, capsCheckedAt(st.KeyGeneration))
}

// checkCaps keeps the promise of spec.ceph.entities[].caps honest: rekey
// gives them to the entities it creates and changes no existing entity's
// caps, so a difference (an adopted entity, caps edited in the spec after
// creation) is reported as CapsMatch=False and a Warning, once per change.
func (r *Reconciler) checkCaps(ctx context.Context, cs *v1.CredentialSet, b *ceph.Backend) error {
	if !capsCheckDue(cs) {
		return nil
	}
	src, err := r.getSourceSecret(ctx, cs)
	if err != nil || src == nil {
		return err
	}
	cur, missing := engine.Current(src.Data, b.Keys())
	if len(missing) > 0 {
		return nil // the reconcile reports the source Secret
	}
	drift, err := b.CapsDrift(ctx, cur)
	if err != nil {
		return err
	}
	at := capsCheckedAt(cs.Status.KeyGeneration)
	c := metav1.Condition{Type: reason.CondCapsMatch, Status: metav1.ConditionTrue, Reason: string(reason.CapsEqual),
		Message: "every entity's caps in the cluster are the spec's " + at, ObservedGeneration: cs.Generation}
	if len(drift) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, string(reason.CapsDiffer)
		c.Message = strings.Join(drift, "; ") + ". rekey gives the spec's caps only to entities it creates and never changes an existing entity's: set them with `ceph auth caps`, or make spec.ceph.entities[].caps say what the entity has " + at
	}
	prev := meta.FindStatusCondition(cs.Status.Conditions, reason.CondCapsMatch)
	// Once per difference: a rotation that changes nothing of it is quiet.
	warn := c.Status == metav1.ConditionFalse && (prev == nil || prev.Status != metav1.ConditionFalse ||
		withoutCheckedAt(prev.Message) != withoutCheckedAt(c.Message))
	if err := r.casStatus(ctx, cs, func(st *v1.CredentialSetStatus) { meta.SetStatusCondition(&st.Conditions, c) }); err != nil {
		return err
	}
	if warn {
		r.event(cs, "Warning", reason.CapsDiffer, "Ceph", "%s", withoutCheckedAt(c.Message))
	}
	return nil
}

func withoutCheckedAt(msg string) string {
	if i := strings.LastIndex(msg, " (checked at key generation "); i >= 0 {
		return msg[:i]
	}
	return msg
}

// uniqueCephEntities refuses a set that would rotate an entity another set
// on the same cluster already rotates (ceph.Clash): the two would delete
// each other's generations. The set created first keeps it, so a working
// set is never stopped by a newcomer; the newcomer changes nothing on the
// cluster until its spec is fixed.
func (r *Reconciler) uniqueCephEntities(ctx context.Context, cs *v1.CredentialSet) error {
	var list v1.CredentialSetList
	if err := r.Client.List(ctx, &list); err != nil {
		return err
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == cs.UID || o.Spec.Ceph == nil || !cephSetFirst(o, cs) {
			continue
		}
		if what := ceph.Clash(o.Spec.Ceph, cs.Spec.Ceph); what != "" {
			return &errSpec{fmt.Sprintf("CredentialSet %s/%s, created earlier, already rotates %s on this Ceph cluster: two sets would delete each other's generations, so this set changed nothing. Remove or rename that entry of spec.ceph.entities (or delete one of the two sets)",
				o.Namespace, o.Name, what)}
		}
	}
	return nil
}

// cephSetFirst tells whether a was created before b (by name when the API
// server gave both the same second), so that of two clashing sets exactly
// one, always the same, is refused.
func cephSetFirst(a, b *v1.CredentialSet) bool {
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// trimPriors applies a lowered keepPriorKeyCount while the set is idle
// (Rook's last migration step is "set keepPriorKeyCount to 0 once every
// consumer moved"): otherwise it would act only at the next discard, and
// the old entities would stay usable until then. status.priorKeyCount is
// read from the cluster afterwards. A refusal (a prior generation this set
// does not own) is a Warning, and the reconcile carries on: a cleanup must
// not hold up rotations.
func (r *Reconciler) trimPriors(ctx context.Context, cs *v1.CredentialSet, b *ceph.Backend) error {
	if !b.TrimDue(cs.Status) {
		return nil
	}
	src, err := r.getSourceSecret(ctx, cs)
	if err != nil || src == nil {
		return err // a missing source Secret is reported by the reconcile
	}
	cur, missing := engine.Current(src.Data, b.Keys())
	if len(missing) > 0 {
		return nil
	}
	if err := b.TrimPriors(ctx, cur); err != nil {
		rf, ok := engine.AsRefusal(err)
		if !ok {
			return err
		}
		r.event(cs, "Warning", reason.Reason(rf.Reason), "Ceph", "keepPriorKeyCount was not applied: %s", rf.Message)
	}
	n, err := b.Priors(ctx, cur)
	if err != nil {
		return err
	}
	if p := cs.Status.PriorKeyCount; p != nil && int(*p) == n {
		return nil
	}
	c := int32(n)
	return r.casStatus(ctx, cs, func(st *v1.CredentialSetStatus) { st.PriorKeyCount = &c })
}

// removeUnusedKeys deletes the listed bootstrap keys once, and records it
// (bootstrap keys no daemon uses); listing a key again later re-checks it.
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
		r.event(cs, "Normal", reason.UnusedKeysRemoved, "Ceph", "removed unused keys %v: Ceph creates them at bootstrap and nothing uses them", removed)
	}
	done := append(slices.Clone(cs.Status.UnusedKeysRemoved), todo...)
	slices.Sort(done)
	return r.casStatus(ctx, cs, func(st *v1.CredentialSetStatus) { st.UnusedKeysRemoved = slices.Compact(done) })
}
