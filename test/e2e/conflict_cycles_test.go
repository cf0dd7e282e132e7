package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// provision creates the set; the faults armed fire in its first
// reconciles.
func (h *conflictHarness) provision(*fault) (string, string) {
	t := h.t
	set := mocoSet(t, h.ns, h.name, h.c)
	deployConsumers(t, set, mocoKeys, h.c.Instances)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	h.gen = 1
	cs := h.await("provisioned", h.phase(v1.PhaseIdle, 1))
	cur := userPasswords(sourceData(t, cs), mocoKeys, "")
	loginMatrix(t, "provisioned", h.c.Instances(), cur, nil)
	assertDistributed(t, h.ns, "cf-creds", cur)
	return "provisioned", "provisioned, every account logs in with the distributed passwords"
}

// rotation runs rotate → Distributed → discard → Idle.
func (h *conflictHarness) rotation(f *fault) (string, string) {
	t := h.t
	id := fmt.Sprintf("cf-%d", h.n)
	cs := getSet(t, h.ns, h.name)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")
	rotate(t, h.ns, h.name, id)
	cs = h.await("Distributed", h.phase(v1.PhaseDistributed, h.gen))
	pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	if len(pend) != len(mocoKeys) || cs.Status.RotationID != id {
		t.Fatalf("%s: Distributed with %d pending passwords: %s", f.name, len(pend), stateOf(cs))
	}
	// Both log in everywhere: a second RETAIN would have evicted the old.
	loginMatrix(t, "Distributed, old passwords", h.c.Instances(), old, nil)
	loginMatrix(t, "Distributed, new passwords", h.c.Instances(), pend, nil)
	assertRecoverable(t, "Distributed", h.c, cs)
	assertDistributed(t, h.ns, "cf-creds", pend)
	h.await("rotate request removed", func(cs *v1.CredentialSet) bool { return cs.Annotations[engine.RotateAnnotation] == "" })
	discard(t, h.ns, h.name, id)
	cs = h.await("Idle", h.phase(v1.PhaseIdle, h.gen+1))
	h.gen++
	if cs.Status.LastRotationID != id {
		t.Fatalf("%s: completed %s", f.name, stateOf(cs))
	}
	loginMatrix(t, "Idle, new passwords in, old out", h.c.Instances(), pend, old)
	assertRecoverable(t, "Idle", h.c, cs)
	assertDistributed(t, h.ns, "cf-creds", pend)
	h.settled(f)
	return fmt.Sprintf("completed, generation %d", h.gen),
		"completed; old and new log in while Distributed, only the new after; stored before applied at the conflict and after"
}

// staleDiscard rotates while a discard request of the previous rotation
// is still on the set (its removal after completion failed, or a crash
// came first): the manager removes it once Distributed, and the user's
// discard of the active rotation, written at that instant, must survive
// the removal and complete the rotation with nothing more asked.
func (h *conflictHarness) staleDiscard(f *fault) (string, string) {
	t := h.t
	id := fmt.Sprintf("cf-%d", h.n)
	cs := getSet(t, h.ns, h.name)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")
	patch := client.MergeFrom(cs.DeepCopy())
	if cs.Annotations == nil {
		cs.Annotations = map[string]string{}
	}
	cs.Annotations[engine.RotateAnnotation] = id
	cs.Annotations[engine.DiscardAnnotation] = cs.Status.LastRotationID
	if err := k8s.Patch(ctxT(t), cs, patch); err != nil {
		t.Fatal(err)
	}
	cs = h.await("Idle, with no discard but the one written at the removal", h.phase(v1.PhaseIdle, h.gen+1))
	h.gen++
	if cs.Status.LastRotationID != id {
		t.Fatalf("%s: completed %s", f.name, stateOf(cs))
	}
	pend := userPasswords(sourceData(t, cs), mocoKeys, "")
	loginMatrix(t, "Idle, new passwords in, old out", h.c.Instances(), pend, old)
	assertDistributed(t, h.ns, "cf-creds", pend)
	h.settled(f)
	return fmt.Sprintf("completed, generation %d", h.gen),
		"the stale request's removal is refused, the new discard request survives and completes the rotation"
}

// rollback runs rotate → Distributed → abort → reset.
func (h *conflictHarness) rollback(f *fault) (string, string) {
	t := h.t
	id := fmt.Sprintf("cf-%d", h.n)
	old := userPasswords(sourceData(t, getSet(t, h.ns, h.name)), mocoKeys, "")
	rotate(t, h.ns, h.name, id)
	cs := h.await("Distributed", h.phase(v1.PhaseDistributed, h.gen))
	pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	loginMatrix(t, "Distributed before the abort", h.c.Instances(), old, nil)
	annotate(t, h.ns, h.name, engine.AbortAnnotation, id)
	cs = h.await("rolled back", func(cs *v1.CredentialSet) bool {
		return cs.Status.Phase == v1.PhaseIdle && !cs.Status.ResetPending && cs.Status.KeyGeneration == h.gen
	})
	if cs.Status.LastRolledBackID != id {
		t.Fatalf("%s: rolled back %s", f.name, stateOf(cs))
	}
	loginMatrix(t, "after the rollback, old passwords in, new out", h.c.Instances(), old, pend)
	assertNoDualPassword(t, h.c)
	src := sourceData(t, cs)
	if len(userPasswords(src, mocoKeys, engine.PendingSuffix)) != 0 || hasID(src) {
		t.Fatalf("%s: the source Secret kept the rolled-back rotation", f.name)
	}
	assertDistributed(t, h.ns, "cf-creds", old)
	h.settled(f)
	return "rolled back, only the current passwords log in",
		"rolled back: only the current passwords log in, no secondary password, pending data dropped"
}

// newTarget adds a distribution target while Idle.
func (h *conflictHarness) newTarget(f *fault) (string, string) {
	t := h.t
	cs := getSet(t, h.ns, h.name)
	patch := client.MergeFrom(cs.DeepCopy())
	cs.Spec.Distribution = append(cs.Spec.Distribution, v1.SecretTarget{Namespace: h.ns, Name: "cf-extra"})
	if err := k8s.Patch(ctxT(t), cs, patch); err != nil {
		t.Fatal(err)
	}
	cur := userPasswords(sourceData(t, cs), mocoKeys, "")
	h.await("fault served", func(*v1.CredentialSet) bool { return h.served[f] })
	assertDistributed(t, h.ns, "cf-extra", cur)
	h.settled(f)
	return "the new target holds the current passwords", "the new target gets the current passwords"
}

// settled: every request annotation is gone, and nothing started again
// (a leftover request must be recognised as stale).
func (h *conflictHarness) settled(f *fault) {
	t := h.t
	t.Helper()
	cs := h.await("requests removed", func(cs *v1.CredentialSet) bool {
		for _, k := range []string{engine.RotateAnnotation, engine.DiscardAnnotation, engine.AbortAnnotation} {
			if cs.Annotations[k] != "" {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond)
	if now := getSet(t, h.ns, h.name); now.Status.Phase != v1.PhaseIdle || now.Status.KeyGeneration != cs.Status.KeyGeneration {
		t.Fatalf("%s: something started after the cycle: %s", f.name, stateOf(now))
	}
}

// warnings lists the Warning events the set got since the cycle began.
func (h *conflictHarness) warnings(since time.Time) string {
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range list.Items {
		at := e.EventTime.Time
		if e.Series != nil {
			at = e.Series.LastObservedTime.Time
		}
		if e.Regarding.Name == h.name && e.Type == "Warning" && !at.Before(since) && !seen[e.Reason] {
			seen[e.Reason] = true
			out = append(out, e.Reason)
		}
	}
	return strings.Join(out, ",")
}
