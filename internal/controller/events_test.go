package controller

import (
	"strings"
	"testing"

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
