package e2e

import (
	"slices"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// assertSteps: every write of the set the watch saw carried the step the
// rest of its status says, and the steps seen include want in order (each
// element: any one of its steps; a step may be passed between two polls
// of the watch, never between two writes).
func (s *setWrites) assertSteps(t *testing.T, name string, want ...[]v1.RotationStep) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.wrongStep) > 0 {
		t.Fatalf("status written with a step its other fields contradict:\n%s", strings.Join(s.wrongStep, "\n"))
	}
	seen := s.steps[name]
	i := 0
	for _, st := range seen {
		if i < len(want) && slices.Contains(want[i], st) {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("steps of %s: saw %v, missing %v from the expected order %v", name, seen, want[i], want)
	}
	observed(t, "%s went through the steps %v", name, seen)
}

func steps(s ...v1.RotationStep) []v1.RotationStep { return s }
