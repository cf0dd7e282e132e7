package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/testenv"
)

// Predicates on the manager's writes: which transition a status patch
// makes, what a Secret update does to the pending data.
func phaseChange(from, to v1.RotationPhase, resetPending bool) func(*write) bool {
	return func(w *write) bool {
		return w.before.Phase == from && w.after.Phase == to && w.after.ResetPending == resetPending
	}
}
func rotateApplied(w *write) bool  { return !w.before.RotateApplied && w.after.RotateApplied }
func discardApplied(w *write) bool { return !w.before.DiscardApplied && w.after.DiscardApplied }
func resetDone(w *write) bool {
	return w.before.Phase == v1.PhaseIdle && w.before.ResetPending && !w.after.ResetPending
}
func hasID(d map[string][]byte) bool { _, ok := d[engine.RotationIDKey]; return ok }
func pendingStored(w *write) bool    { return !hasID(w.old) && hasID(w.data) }
func pendingConfirmed(w *write) bool {
	return hasID(w.old) && !hasID(w.data) && string(w.data["ADMIN_PASSWORD"]) == string(w.old["ADMIN_PASSWORD"+engine.PendingSuffix])
}
func pendingDropped(w *write) bool {
	return hasID(w.old) && !hasID(w.data) && string(w.data["ADMIN_PASSWORD"]) == string(w.old["ADMIN_PASSWORD"])
}
func newSecretsOut(w *write) bool {
	return w.obj.GetName() == "cf-creds" && string(w.data["ADMIN_PASSWORD"]) != string(w.old["ADMIN_PASSWORD"])
}
func dropsRotateOnly(w *write) bool {
	_, d := w.dropped[engine.DiscardAnnotation]
	return w.dropped[engine.RotateAnnotation] && !d
}
func dropsDiscard(w *write) bool { return w.dropped[engine.DiscardAnnotation] }
func dropsRotate(w *write) bool  { return w.kind == kAnnotation && w.dropped[engine.RotateAnnotation] }

// anyWrite: after losing a race the manager recovers by moving on; its
// next successful write of the set or its Secrets says it did.
func anyWrite(w *write) bool { return w.kind != kOther }

// TestAPIConflicts injects an API write conflict at every write of a MySQL
// rotation and of a rollback — each status transition (a compare-and-set
// JSON patch), the source Secret and distribution Secret updates, the
// annotation removals — one per cycle, under a continuous login prober.
// Injected faults fail the write with a 409 without sending it; race
// faults let a concurrent writer change the object first and send the
// stale write to the real server, which refuses it (409 on a Secret's
// resourceVersion, 422 on a transition's test op) or accepts it. At the
// instant of each fault (the manager waits inside the write) and at every
// phase after it, the source Secret holds a password for every one MySQL
// accepts; while Distributed the old passwords still log in (no second
// RETAIN); each cycle completes, or for a rollback finishes.
func TestAPIConflicts(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	in := newInjector(k8s)
	startManager(t, cp.Config, in.wrap)
	h := &conflictHarness{t: t, c: c, ns: ns, name: "cf", in: in, served: map[*fault]bool{}}

	// Provisioning: the first status write is optimistic on
	// resourceVersion (a real 409), then the distribution Secret's create.
	h.run(h.provision,
		&fault{name: "status initialised (merge patch on resourceVersion)", kind: kStatus, race: raceBump,
			match: phaseChange("", v1.PhaseIdle, false)},
		&fault{name: "distribution Secret create at provisioning", kind: kDistCreate,
			match: func(w *write) bool { return w.obj.GetName() == "cf-creds" }})
	h.p = startProber(t, c.Instances(), ns, "cf-creds", mocoKeys)
	for _, f := range []*fault{
		{name: "status Idle→Rotating", kind: kStatus, match: phaseChange(v1.PhaseIdle, v1.PhaseRotating, false)},
		{name: "status rotateApplied", kind: kStatus, match: rotateApplied},
		{name: "status Rotating→Distributed", kind: kStatus, match: phaseChange(v1.PhaseRotating, v1.PhaseDistributed, false)},
		{name: "status discardApplied", kind: kStatus, match: discardApplied},
		{name: "status Distributed→Idle", kind: kStatus, match: phaseChange(v1.PhaseDistributed, v1.PhaseIdle, false)},
		{name: "status Idle→Rotating, made first by another writer", kind: kStatus, race: raceWin, recoverOn: anyWrite,
			match: phaseChange(v1.PhaseIdle, v1.PhaseRotating, false)},
		{name: "status Rotating→Distributed, made first by another writer", kind: kStatus, race: raceWin, recoverOn: anyWrite,
			match: phaseChange(v1.PhaseRotating, v1.PhaseDistributed, false)},
		{name: "status Distributed→Idle, made first by another writer", kind: kStatus, race: raceWin, recoverOn: anyWrite,
			match: phaseChange(v1.PhaseDistributed, v1.PhaseIdle, false)},
		{name: "status Rotating→Distributed, resourceVersion bumped by an unrelated write", kind: kStatus, race: raceBump,
			match: phaseChange(v1.PhaseRotating, v1.PhaseDistributed, false)},
		{name: "source Secret update storing the pending secrets", kind: kSource, race: raceBump, match: pendingStored},
		{name: "source Secret update confirming pending into current", kind: kSource, race: raceBump, match: pendingConfirmed},
		{name: "distribution Secret update to the new secrets", kind: kDistUpdate, race: raceBump, match: newSecretsOut},
		{name: "annotation patch removing the served rotate request", kind: kAnnotation, match: dropsRotateOnly, recoverOn: dropsRotate},
		{name: "annotation patch removing the discard request at completion", kind: kAnnotation, match: dropsDiscard},
	} {
		h.run(h.rotation, f)
	}
	h.run(h.staleDiscard, &fault{name: "annotation patch removing a stale discard request while the user writes a new one",
		kind: kAnnotation, race: raceRequest, recoverOn: discardApplied,
		match: func(w *write) bool {
			// Removed while Distributed: only a stale request is.
			cs, _ := w.obj.(*v1.CredentialSet)
			return w.dropped[engine.DiscardAnnotation] && cs != nil && cs.Status.Phase == v1.PhaseDistributed
		}})
	for _, f := range []*fault{
		{name: "status rollback Distributed→Idle+resetPending", kind: kStatus, match: phaseChange(v1.PhaseDistributed, v1.PhaseIdle, true)},
		{name: "status rollback, made first by another writer", kind: kStatus, race: raceWin, recoverOn: anyWrite,
			match: phaseChange(v1.PhaseDistributed, v1.PhaseIdle, true)},
		{name: "status reset done (resetPending cleared)", kind: kStatus, match: resetDone},
		{name: "source Secret update dropping the pending secrets after the reset", kind: kSource, race: raceBump, match: pendingDropped},
		{name: "annotation patch removing the abort request after the reset", kind: kAnnotation,
			match: func(w *write) bool { return w.dropped[engine.AbortAnnotation] }},
	} {
		h.run(h.rollback, f)
	}
	h.run(h.newTarget, &fault{name: "distribution Secret create for a target added while Idle, made first by another writer",
		kind: kDistCreate, race: raceWin, recoverOn: anyWrite, match: func(w *write) bool { return w.obj.GetName() == "cf-extra" }})
	h.p.assertNoGap(t)
	assertSuperReadOnly(t, c.Replicas...)
}

type conflictHarness struct {
	t    *testing.T
	c    *testenv.MySQLCluster
	ns   string
	name string
	in   *injector
	p    *prober
	n    int
	gen  int64
	// served: faults the test checked and let go
	served map[*fault]bool
}

// run carries out one cycle with faults armed, and records a row each.
func (h *conflictHarness) run(cycle func(*fault) (outcome, expected string), faults ...*fault) {
	t := h.t
	h.n++
	var marks []*scenarioMark
	for _, f := range faults {
		marks = append(marks, matrixMark(t, h.p, "API conflict: "+f.name))
		h.in.arm(f)
	}
	since := time.Now()
	t.Logf("cycle %d: %s", h.n, faults[0].name) // names the fault for a check failing in the cycle
	outcome, expected := cycle(faults[0])
	warned := h.warnings(since)
	if warned != "" {
		outcome += "; Warning events in this cycle: " + warned
		observed(t, "Warning events in this cycle: %s", warned)
	}
	for i, f := range faults {
		if !h.in.hasFired(f) {
			t.Fatalf("%s: the fault never fired", f.name)
		}
		h.await("the manager wrote again after the conflict on "+f.name, func(*v1.CredentialSet) bool { _, ok := h.in.recovered(f); return ok })
		d, _ := h.in.recovered(f)
		how := "injected 409, not sent"
		if f.race != raceNone {
			how = "server: " + errText(f.serverErr)
		}
		bad := false
		switch {
		case f.race == raceBump && f.kind == kStatus && f.at.patch.Type() == types.JSONPatchType:
			// The compare-and-set is on (phase, rotationID), not on
			// resourceVersion: an unrelated writer must not stall it.
			bad = f.serverErr != nil
		case f.race == raceBump:
			bad = !apierrors.IsConflict(f.serverErr)
		case f.race == raceWin && f.kind == kDistCreate:
			bad = !apierrors.IsAlreadyExists(f.serverErr)
		case f.race == raceWin && f.kind == kStatus && f.at.before.Phase != f.at.after.Phase:
			bad = !apierrors.IsInvalid(f.serverErr)
		case f.race == raceRequest:
			// The removal tests the value it read: the new request stays.
			bad = !apierrors.IsInvalid(f.serverErr)
		}
		if bad {
			t.Fatalf("%s: the real server did not refuse the stale write: %v", f.name, f.serverErr)
		}
		if f.race == raceWin && f.kind == kDistCreate {
			// Losing the race to create a Secret is benign (#19 item 2):
			// the manager re-reads it and goes on, with no Warning
			// (BackendError) and without ever setting Degraded.
			if warned != "" {
				t.Fatalf("%s: a lost create race was reported: Warning events %s", f.name, warned)
			}
			if c := condition(getSet(t, h.ns, h.name), "Degraded"); c != nil && c.Status == metav1.ConditionTrue {
				t.Fatalf("%s: Degraded=True after a lost create race: %s: %s", f.name, c.Reason, c.Message)
			}
		}
		t.Logf("cycle %d, %s (%s): %s, recovered in %s", h.n, f.name, how, outcome, d.Round(time.Millisecond))
		marks[i].saw("the stale write: %s; the manager's next write of it came %s later", how, d.Round(time.Millisecond))
		marks[i].doneIn(t, "the cycle ends as without the conflict: "+expected, d)
	}
}

func errText(err error) string {
	switch {
	case err == nil:
		return "accepted"
	case apierrors.IsConflict(err):
		return "409 Conflict"
	case apierrors.IsAlreadyExists(err):
		return "409 AlreadyExists"
	case apierrors.IsInvalid(err):
		return "422 test op failed"
	}
	return err.Error()
}

// await polls the set until cond holds, and meanwhile serves fired
// faults: while the manager waits inside the failed write, no secret
// MySQL accepts may be missing from the source Secret.
func (h *conflictHarness) await(what string, cond func(*v1.CredentialSet) bool) *v1.CredentialSet {
	t := h.t
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case f := <-h.in.fired:
			cs := getSet(t, h.ns, h.name)
			t.Cleanup(func() { closeOnce(f.release) })
			if h.hasSource() {
				assertRecoverable(t, "at the conflict", h.c, cs)
			}
			closeOnce(f.release)
			h.served[f] = true
			continue
		default:
		}
		cs := getSet(t, h.ns, h.name)
		if cond(cs) {
			observed(t, "%s (phase %s, generation %d)", what, cs.Status.Phase, cs.Status.KeyGeneration)
			return cs
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, stateOf(cs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

func (h *conflictHarness) hasSource() bool {
	name := naming.SourceSecretName(&v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: h.name}})
	return k8s.Get(context.Background(), client.ObjectKey{Namespace: OperatorNamespace, Name: name}, &corev1.Secret{}) == nil
}

func (h *conflictHarness) phase(p v1.RotationPhase, gen int64) func(*v1.CredentialSet) bool {
	return func(cs *v1.CredentialSet) bool { return cs.Status.Phase == p && cs.Status.KeyGeneration == gen }
}

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
