package explorer

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// A rotation is discarded by spec.rotation.discardGeneration alone (no
// discard annotation is ever made), set at every step of the rotation,
// with crashes: no consumer is locked out, nothing is lost, and a value
// naming the current generation discards nothing.
func TestPathDiscardGeneration(t *testing.T) {
	reached := map[string]bool{}
	explorePath(t, Options{Instances: []string{"i0", "i1"}, Crashes: true, DiscardGenerations: true,
		Only: []string{"user: rotate r1", "user: discardGeneration", "consumer"},
		Observe: func(w *World) {
			st, dg := w.Set.Status, w.Set.Spec.Rotation.DiscardGeneration
			if w.Set.Annotations[engine.DiscardAnnotation] != "" {
				t.Fatalf("a discard annotation in a run without one: %s", w.Summary())
			}
			switch {
			case st.Phase == v1.PhaseIdle && st.KeyGeneration == 2:
				reached["discarded by discardGeneration"] = true
			case st.Phase == v1.PhaseDistributed && st.DiscardStarted:
				reached["discard under way"] = true
			case st.Phase == v1.PhaseDistributed && dg != nil && *dg == st.KeyGeneration:
				reached["distributed, discardGeneration at the current generation"] = true
			}
		}}, 9)
	for _, want := range []string{"discarded by discardGeneration", "discard under way", "distributed, discardGeneration at the current generation"} {
		if !reached[want] {
			t.Errorf("never reached: %s (%v)", want, reached)
		}
	}
}
