package explorer

import (
	"context"
	"strconv"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// The Ceph world's kept priors (Options.KeepPriors, the set's
// keepPriorKeyCount, KeepPriorsAnnotation). The decisions are the Ceph
// backend's (internal/backend/ceph overlap.go, deletion.go; cephkube's
// trimPriors), each proven on a real ceph-mon:
//
//   - the discard (Retire) keeps the keepPriorKeyCount generations just
//     below the new one and removes the older ones (priorsToRetire), every
//     one recorded for the set or none: TestOverlappingRotation (keep 0, 1
//     and 2), TestKeptPriorsThroughARotation;
//   - a rotation's Apply removes only the generations newer than the
//     current one, a reset (rollback, recover) too: the kept priors stay,
//     and still authenticate: TestKeptPriorsThroughARotation;
//   - Precheck and the upkeep at rest refuse a newer generation, never an
//     older one: TestKeptPriorsThroughARotation;
//   - status.priorKeyCount (engine.Inventory) counts the generations older
//     than the current one: TestOverlappingRotation, TestTrimPriors;
//   - a keepPriorKeyCount lowered while the set is at rest is applied
//     where the backend is built (cephkube's trimPriors: TrimDue from the
//     status, then TrimPriors, a refusal a Warning), and the count read
//     again into the status: TestTrimPriors, TestTrimDue;
//   - deletion removes every kept prior (Release once the monitor is seen
//     to hold the current key, Deprovision every generation):
//     TestReleaseOnTheRealMon (keep 2), TestDeprovisionOnTheRealMon.

var _ engine.Inventory = (*cephBackend)(nil)

// cephKeep is the set's keepPriorKeyCount (0 without the annotation).
func cephKeep(cs *v1.CredentialSet) int {
	n, _ := strconv.Atoi(cs.Annotations[KeepPriorsAnnotation])
	return n
}

// cephPriorsToRetire is priorsToRetire: of base's gens (highest first),
// those older than the keep generations just below gen; gen and anything
// newer are never picked.
func cephPriorsToRetire(base string, gens []int64, gen int64, keep int) []string {
	var doomed []string
	kept := 0
	for _, g := range gens {
		if g >= gen {
			continue
		}
		if kept < keep {
			kept++
			continue
		}
		doomed = append(doomed, cephEntityIn(base, g))
	}
	return doomed
}

// priorsBeyond are, of every entity, the priors beyond keepPriorKeyCount
// below the generation secrets names (retirePriors).
func (b *cephBackend) priorsBeyond(in *Instance, secrets engine.Secrets) []string {
	var doomed []string
	for _, base := range b.Keys() {
		_, gen, _ := b.current(in, secrets, base)
		doomed = append(doomed, cephPriorsToRetire(base, b.generations(in, base), gen, cephKeep(b.cs))...)
	}
	return doomed
}

// Priors is engine.Inventory (status.priorKeyCount): the most generations
// older than the current one any entity has on the monitor.
func (b *cephBackend) Priors(_ context.Context, cur engine.Secrets) (int, error) {
	in, err := b.mon()
	if err != nil {
		return 0, err
	}
	most := 0
	for _, base := range b.Keys() {
		_, gen, _ := b.current(in, cur, base)
		n := 0
		for _, g := range b.generations(in, base) {
			if g < gen {
				n++
			}
		}
		most = max(most, n)
	}
	return most, nil
}

// Priors: InPlace keeps none, and asks nothing.
func (b *cephInPlaceBackend) Priors(context.Context, engine.Secrets) (int, error) { return 0, nil }

// trimDue is TrimDue: a set at rest that keeps more priors than
// keepPriorKeyCount allows, or whose count is unknown.
func (b *cephBackend) trimDue(st v1.CredentialSetStatus) bool {
	if st.KeyGeneration == 0 || st.Phase != v1.PhaseIdle && st.Phase != "" || st.RotationID != "" || st.ResetPending {
		return false
	}
	return st.PriorKeyCount == nil || int(*st.PriorKeyCount) > cephKeep(b.cs)
}

// trimAtRest is cephkube's trimPriors, run where the backend is built:
// the priors beyond keepPriorKeyCount below the current generation go
// (all recorded for the set, or none, a refusal being a Warning), asking
// the set's fence before the monitor is changed; then status.priorKeyCount
// is read again.
func (b *cephBackend) trimAtRest(ctx context.Context, k registry.Kube) error {
	if !b.trimDue(b.cs.Status) {
		return nil
	}
	cur, ok, err := k.Current(ctx, b.Keys())
	if err != nil || !ok {
		return err
	}
	in, err := b.mon()
	if err != nil {
		return err
	}
	if doomed := b.priorsBeyond(in, cur); len(doomed) > 0 {
		if err := k.Fence(ctx); err != nil {
			return err
		}
		if err := b.remove(in, doomed, "ceph/prior-removed"); err != nil {
			rf, ok := engine.AsRefusal(err)
			if !ok {
				return err
			}
			k.Event("Warning", reason.Reason(rf.Reason), "Ceph", "keepPriorKeyCount was not applied: "+rf.Message)
		}
	}
	n, err := b.Priors(ctx, cur)
	if err != nil {
		return err
	}
	if p := b.cs.Status.PriorKeyCount; p != nil && int(*p) == n {
		return nil
	}
	c := int32(n)
	return k.UpdateStatus(ctx, func(st *v1.CredentialSetStatus) { st.PriorKeyCount = &c })
}

// lowerKeep is the user lowering keepPriorKeyCount by one (Rook's last
// migration step sets it to 0), a spec edit.
func lowerKeep(w *World) bool {
	n := cephKeep(w.Set)
	if !w.ceph() || w.cephInPlace() || n == 0 {
		return false
	}
	w.Set.Annotations[KeepPriorsAnnotation] = strconv.Itoa(n - 1)
	return true
}
