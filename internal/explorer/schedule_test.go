package explorer

import (
	"strings"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Time passes an hour at a time over a set with policy Schedule and a
// daily window (02:00–03:00 UTC), with crashes, rotate and discard
// requests: a scheduled rotation waits while its window is closed, starts
// only inside it (an invariant checked in every state), runs on past its
// end, and no consumer is locked out meanwhile.
func TestPathScheduleWindow(t *testing.T) {
	reached := map[string]bool{}
	explorePath(t, Options{Instances: []string{"i0"}, Crashes: true, Schedule: true,
		Only: []string{"clock", "user: rotate r1", "user: discard (active", "consumer"},
		Observe: func(w *World) {
			st, clock := w.Set.Status, now.Add(w.Clock)
			scheduled := strings.HasPrefix(st.RotationID, "schedule-")
			switch {
			case st.Phase == v1.PhaseIdle && st.CurrentSince != nil && !clock.Before(st.CurrentSince.Add(modelInterval)) &&
				st.NextRotationAt != nil && st.NextRotationAt.After(clock):
				reached["due, held by the closed window"] = true
			case scheduled && st.Phase == v1.PhaseRotating:
				reached["a scheduled rotation started"] = true
			case scheduled && st.Phase == v1.PhaseDistributed && clock.Sub(st.RotationStartedAt.Time) >= modelWindow.Duration.Duration:
				reached["a scheduled rotation past its window's end"] = true
			case st.RotationID == "r1" && w.Clock%(24*time.Hour) < 2*time.Hour:
				reached["a rotate request outside the window"] = true
			}
		}}, 7)
	for _, want := range []string{"due, held by the closed window", "a scheduled rotation started",
		"a scheduled rotation past its window's end", "a rotate request outside the window"} {
		if !reached[want] {
			t.Errorf("never reached: %s (%v)", want, reached)
		}
	}
}
