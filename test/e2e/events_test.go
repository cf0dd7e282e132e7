package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestEventsOfEveryRotation: after three rotations of one set
// by one manager, the Events list the three RotationStarted notes, each
// with its rotation ID, as separate Events — the recorder folds nothing of
// a later rotation into an earlier one's series. No Warning is emitted.
func TestEventsOfEveryRotation(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{NoReplicas: true})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	cs := appUserSet(t, ns, "ledger", c)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "ledger", v1.PhaseIdle, 1)
	since := time.Now()
	ids := []string{"ledger-a", "ledger-b", "ledger-c"}
	for i, id := range ids {
		rotate(t, ns, "ledger", id)
		waitPhase(t, ns, "ledger", v1.PhaseDistributed, int64(i+1))
		discard(t, ns, "ledger", id)
		waitPhase(t, ns, "ledger", v1.PhaseIdle, int64(i+2))
	}
	for _, why := range []reason.Reason{reason.RotationStarted, reason.RotationCompleted} {
		eventually(t, 30*time.Second, "a "+string(why)+" Event per rotation", func() (bool, string) {
			var list eventsv1.EventList
			if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			var notes []string
			for _, e := range list.Items {
				if e.Regarding.Name == "ledger" && e.Reason == string(why) {
					notes = append(notes, e.Note)
				}
			}
			for _, id := range ids {
				n := 0
				for _, note := range notes {
					if strings.Contains(note, "rotation "+id+" ") {
						n++
					}
				}
				if n != 1 {
					return false, fmt.Sprintf("%d Events note %s: %q", n, id, notes)
				}
			}
			return len(notes) == len(ids), fmt.Sprintf("%q", notes)
		})
	}
	assertNoWarningSince(t, ns, "ledger", since, "three healthy rotations")
}
