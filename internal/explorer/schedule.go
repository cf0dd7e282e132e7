package explorer

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// The model's schedule: due ten minutes after the current credentials,
// started only between 02:00 and 03:00 UTC. The model's clock starts at
// midnight, so an hour later a rotation is due and its window closed.
var (
	modelInterval = 10 * time.Minute
	modelWindow   = v1.RotationWindow{Start: "02:00", Duration: metav1.Duration{Duration: time.Hour}}
	// maxClock bounds the hours that pass, so the state space stays
	// finite: past the window, and into the next day's.
	maxClock = 27 * time.Hour
)

// scheduled is rot with policy Schedule and the model's window.
func scheduled(rot v1.RotationSpec) v1.RotationSpec {
	rot.Policy, rot.Interval = v1.PolicySchedule, &metav1.Duration{Duration: modelInterval}
	rot.Windows = []v1.RotationWindow{modelWindow}
	return rot
}

// hourPasses moves the model's clock on by an hour: what the next
// reconcile decides then depends on whether the window is open.
func hourPasses(w *World) bool {
	if w.Gone || w.Clock+time.Hour > maxClock {
		return false
	}
	w.Clock += time.Hour
	return true
}

// startsInWindow: a rotation the schedule started began while one of the
// set's windows was open (it may run past its end).
func startsInWindow(w *World) string {
	rot, st := w.Set.Spec.Rotation, w.Set.Status
	if len(rot.Windows) == 0 || !strings.HasPrefix(st.RotationID, "schedule-") || st.RotationStartedAt == nil {
		return ""
	}
	at, err := engine.Windows(rot.Windows, st.RotationStartedAt.Time)
	if err != nil || at.Open {
		return ""
	}
	return fmt.Sprintf("scheduled rotation %s started at %s, outside every window", st.RotationID, st.RotationStartedAt.UTC().Format(time.Kitchen))
}
