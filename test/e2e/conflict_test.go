package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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

	// Provisioning: the first status write (a new set is Pending) is
	// optimistic on resourceVersion (a real 409), then the distribution
	// Secret's create.
	h.run(h.provision,
		&fault{name: "status initialised (merge patch on resourceVersion)", kind: kStatus, race: raceBump,
			match: phaseChange("", v1.PhasePending, false)},
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
			// Losing the race to create a Secret is benign:
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
