package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// Check requests (kubectl rekey check) at every step of a rotation and
// its rollback, with crashes: answering one (a status write of its own,
// before the rest of the reconcile) keeps every invariant, and every
// answer is the one the request asked for, passed (the model's consumer
// exists; the model backend has no checks of its own, and says so).
func TestPathCheck(t *testing.T) {
	reached := map[string]bool{}
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Crashes: true, Checks: true,
		Only: []string{"user: rotate r1", "user: check", "user: abort (active ID)", "consumer"},
		Observe: func(w *World) {
			c := w.Set.Status.Check
			if c == nil {
				return
			}
			if id := w.Set.Annotations[engine.CheckAnnotation]; c.ID != "k1" && c.ID != "k2" || id == "" {
				t.Fatalf("status.check answers %q, the request is %q: %s", c.ID, id, w.Summary())
			}
			if !c.Passed {
				t.Fatalf("a check of the model failed: %+v: %s", c.Findings, w.Summary())
			}
			switch st := w.Set.Status; {
			case st.Phase == v1.PhaseRotating:
				reached["answered while Rotating"] = true
			case st.Phase == v1.PhaseDistributed:
				reached["answered while Distributed"] = true
			case st.ResetPending:
				reached["answered while a rollback resets"] = true
			case st.Phase == v1.PhaseIdle && st.KeyGeneration == 2:
				reached["answered after the rotation completed"] = true
			}
		}}, 8)
	for _, want := range []string{"answered while Rotating", "answered while Distributed", "answered while a rollback resets"} {
		if !reached[want] {
			t.Errorf("never reached: %s (%v)", want, reached)
		}
	}
}
