package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// relatedLog records the related reference the recorder gets: part of the
// key events.k8s.io folds Events on.
type relatedLog struct {
	eventLog
	related []string
}

func (l *relatedLog) Eventf(reg runtime.Object, rel runtime.Object, typ, why, action, note string, args ...any) {
	l.eventLog.Eventf(reg, rel, typ, why, action, note, args...)
	s := ""
	if rel != nil {
		s = relatedPath(rel)
	}
	l.related = append(l.related, s)
}

func relatedPath(rel runtime.Object) string {
	if ref, ok := rel.(*corev1.ObjectReference); ok {
		return ref.FieldPath
	}
	return "?"
}

// TestWaitingForRolloutOncePerRotation: WaitingForRollout is a Normal
// Event emitted once per rotation, not on every 15 s requeue, and Events
// of two rotations carry distinct related references (so the recorder
// never folds one rotation's into the other's).
func TestWaitingForRolloutOncePerRotation(t *testing.T) {
	ev := &relatedLog{}
	r := &Reconciler{Recorder: ev}
	cs := &v1.CredentialSet{Status: v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r1",
		Consumers: []v1.ConsumerStatus{{Kind: v1.KindDeployment, Namespace: "app", Name: "web"}}}}
	cs.Name, cs.Namespace, cs.UID = "set", "ns", "uid-1"
	d := engine.Decision{Action: engine.Wait, Reason: reason.WaitingForRollout, Requeue: engine.RequeueRollout}
	for i := 0; i < 3; i++ {
		r.noteWaiting(cs, cs.Status, d)
	}
	cs.Status.RotationID = "r2"
	r.noteWaiting(cs, cs.Status, d)
	r.noteWaiting(cs, cs.Status, d)
	if len(ev.got) != 2 {
		t.Fatalf("want one WaitingForRollout per rotation, got %v", ev.got)
	}
	for i, id := range []string{"r1", "r2"} {
		if !strings.HasPrefix(ev.got[i], "Normal WaitingForRollout: rotation "+id) || !strings.Contains(ev.got[i], "app/web") {
			t.Errorf("event %d: %s", i, ev.got[i])
		}
	}
	if ev.related[0] == ev.related[1] || ev.related[0] == "" {
		t.Fatalf("two rotations' Events share the related reference %q", ev.related[0])
	}
}

// TestEventNoteBounded: whatever a message holds, the note fits well
// under the API server's 1,024-byte limit, stays valid UTF-8, and keeps
// its start and its end (where the next step is said).
func TestEventNoteBounded(t *testing.T) {
	long := func(unit string, n int) string {
		return "START " + strings.Repeat(unit, n) + " END: run kubectl rekey recover"
	}
	for _, tc := range []struct {
		name string
		msg  string
	}{
		{"short", "rotation r1 started"},
		{"exactly the bound", strings.Repeat("x", maxEventNote)},
		{"one over", strings.Repeat("x", maxEventNote+1)},
		{"ascii, 64 KiB", long("app-user@% on db-7.db.ns.svc:3306, ", 2000)},
		{"multi-byte", long("ユーザー→", 5000)},
	} {
		got := EventNote(tc.msg)
		if len(got) > maxEventNote {
			t.Errorf("%s: %d bytes, over %d", tc.name, len(got), maxEventNote)
		}
		if !utf8.ValidString(got) {
			t.Errorf("%s: not valid UTF-8", tc.name)
		}
		if len(tc.msg) <= maxEventNote && got != tc.msg {
			t.Errorf("%s: a note that fits was changed: %q", tc.name, got)
		}
		if len(tc.msg) > maxEventNote {
			if !strings.HasSuffix(got, tc.msg[len(tc.msg)-20:]) || !strings.Contains(got, "kubectl rekey status -v") {
				t.Errorf("%s: lost its end or the pointer to the rest: %q", tc.name, got)
			}
		}
	}
}

// TestLargestEventsBounded: the Events that list consumers, at the API's
// maximum list sizes and name lengths, are summarised and bounded as
// recorded.
func TestLargestEventsBounded(t *testing.T) {
	ev := &eventLog{}
	r := &Reconciler{Recorder: ev}
	cs := &v1.CredentialSet{Status: v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r1"}}
	cs.Name, cs.Namespace, cs.UID = strings.Repeat("s", 253), strings.Repeat("n", 63), "uid-1"
	for i := range 96 { // 64 consumers and 32 groups
		cs.Status.Consumers = append(cs.Status.Consumers, v1.ConsumerStatus{Kind: v1.KindStatefulSet,
			Namespace: strings.Repeat("n", 63), Name: fmt.Sprintf("%0253d", i)})
	}
	r.noteWaiting(cs, cs.Status, engine.Decision{Requeue: engine.RequeueRollout})
	cs.Status.ResetPending, cs.Status.LastRolledBackID = true, strings.Repeat("r", 253)
	r.noteWaiting(cs, cs.Status, engine.Decision{Requeue: engine.RequeueRollout})
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("Deployment %s/%0253d", strings.Repeat("n", 63), i)
	}
	r.event(cs, "Warning", reason.UsersInUse, "Delete", "the set is kept because %s may still use them", summarize(names, "consumers", "spec.consumers"))
	r.event(cs, "Warning", reason.BackendError, "Reconcile", "%s", strings.Repeat("x", 70000))
	if len(ev.got) != 4 {
		t.Fatalf("want 4 Events, got %d", len(ev.got))
	}
	for _, e := range ev.got {
		note := e[strings.Index(e, ": ")+2:]
		if len(note) > maxEventNote {
			t.Errorf("note of %d bytes: %.120s…", len(note), note)
		}
	}
	if !strings.Contains(ev.got[0], "96 consumers (first: ") || !strings.Contains(ev.got[2], "1000 consumers (first: ") {
		t.Errorf("long lists not summarised: %.300s / %.300s", ev.got[0], ev.got[2])
	}
}

// TestWaitingForRollbackNamesItsRotation: after an abort, WaitingForRollout
// names the rotation rolled back (not the one completed before it), and a
// recovery on an idle set its request; both say the reset waits for
// gracePeriod.
func TestWaitingForRollbackNamesItsRotation(t *testing.T) {
	ev := &relatedLog{}
	r := &Reconciler{Recorder: ev, DefaultGracePeriod: 5 * time.Minute}
	cs := &v1.CredentialSet{Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true, LastRotationID: "r3", LastRolledBackID: "r4",
		RestartID: engine.RollbackRestartID("r4", "12"), Consumers: []v1.ConsumerStatus{{Kind: v1.KindDeployment, Namespace: "app", Name: "web"}}}}
	cs.Name, cs.Namespace, cs.UID = "set", "ns", "uid-1"
	d := engine.Decision{Action: engine.Wait, Reason: reason.WaitingForRollout, Requeue: engine.RequeueRollout}
	r.noteWaiting(cs, cs.Status, d)
	cs.Status.LastRecoverID, cs.Status.RestartID = "x1", engine.RecoverRestartID("x1", "12")
	r.noteWaiting(cs, cs.Status, d)
	if len(ev.got) != 2 {
		t.Fatalf("want 2 Events, got %v", ev.got)
	}
	for i, want := range []string{"Normal WaitingForRollout: rollback of rotation r4: waiting for Deployment app/web", "Normal WaitingForRollout: recovery x1: waiting for Deployment app/web"} {
		if !strings.HasPrefix(ev.got[i], want) || !strings.Contains(ev.got[i], "gracePeriod (5m0s)") || strings.Contains(ev.got[i], "r3") {
			t.Errorf("event %d: %s\nwant it to start %q and name gracePeriod (5m0s)", i, ev.got[i], want)
		}
	}
	if ev.related[0] != "rotation:reset:r4" || ev.related[1] != "rotation:reset:x1" {
		t.Errorf("related references %q, want rotation:reset:r4 and rotation:reset:x1", ev.related)
	}
}
