package cephkube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

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
func checkCaps(ctx context.Context, k registry.Kube, cs *v1.CredentialSet, b *ceph.Backend) error {
	if !capsCheckDue(cs) {
		return nil
	}
	cur, ok, err := k.Current(ctx, b.Keys())
	if err != nil || !ok {
		return err // the reconcile reports the source Secret
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
	if err := k.UpdateStatus(ctx, func(st *v1.CredentialSetStatus) { meta.SetStatusCondition(&st.Conditions, c) }); err != nil {
		return err
	}
	if warn {
		k.Event("Warning", reason.CapsDiffer, "Ceph", withoutCheckedAt(c.Message))
	}
	return nil
}

func withoutCheckedAt(msg string) string {
	if i := strings.LastIndex(msg, " (checked at key generation "); i >= 0 {
		return msg[:i]
	}
	return msg
}

// trimPriors applies a lowered keepPriorKeyCount while the set is idle
// (Rook's last migration step is "set keepPriorKeyCount to 0 once every
// consumer moved"): otherwise it would act only at the next discard, and
// the old entities would stay usable until then. status.priorKeyCount is
// read from the cluster afterwards. A refusal (a prior generation this set
// does not own) is a Warning, and the reconcile carries on: a cleanup must
// not hold up rotations.
func trimPriors(ctx context.Context, k registry.Kube, cs *v1.CredentialSet, b *ceph.Backend) error {
	if !b.TrimDue(cs.Status) {
		return nil
	}
	cur, ok, err := k.Current(ctx, b.Keys())
	if err != nil || !ok {
		return err // a missing source Secret is reported by the reconcile
	}
	if err := b.TrimPriors(ctx, cur); err != nil {
		rf, ok := engine.AsRefusal(err)
		if !ok {
			return err
		}
		k.Event("Warning", reason.Reason(rf.Reason), "Ceph", "keepPriorKeyCount was not applied: "+rf.Message)
	}
	n, err := b.Priors(ctx, cur)
	if err != nil {
		return err
	}
	if p := cs.Status.PriorKeyCount; p != nil && int(*p) == n {
		return nil
	}
	c := int32(n)
	return k.UpdateStatus(ctx, func(st *v1.CredentialSetStatus) { st.PriorKeyCount = &c })
}

// removeUnusedKeys deletes the listed bootstrap keys once, and records it
// (Ceph makes them at bootstrap and nothing uses them); listing a key again
// later re-checks it.
func removeUnusedKeys(ctx context.Context, k registry.Kube, cs *v1.CredentialSet, b *ceph.Backend) error {
	var todo []string
	for _, key := range cs.Spec.Ceph.RemoveUnusedKeys {
		if !slices.Contains(cs.Status.UnusedKeysRemoved, key) {
			todo = append(todo, key)
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
		k.Event("Normal", reason.UnusedKeysRemoved, "Ceph", fmt.Sprintf("removed unused keys %v: Ceph creates them at bootstrap and nothing uses them", removed))
	}
	done := append(slices.Clone(cs.Status.UnusedKeysRemoved), todo...)
	slices.Sort(done)
	return k.UpdateStatus(ctx, func(st *v1.CredentialSetStatus) { st.UnusedKeysRemoved = slices.Compact(done) })
}
