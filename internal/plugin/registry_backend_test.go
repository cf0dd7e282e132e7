package plugin

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
)

// testOnly is a backend the plugin has never heard of, registered as any
// backend is: the plugin speaks of its sets in its words and asks the
// engine with its traits, with no line of the plugin naming it. It
// selects sets by an annotation, which no other test sets.
const testOnlyAnnotation = "test.rekey.io/backend"

func init() {
	registry.Register(registry.Entry{
		Kind:    "testonly",
		Field:   "spec.testonly",
		Selects: func(cs *v1.CredentialSet) bool { return cs.Annotations[testOnlyAnnotation] == "testonly" },
		Describe: registry.Describe{
			Name:    "TestDB",
			Secrets: "tokens",
			// Rotates in place: an applied rotation can only complete.
			Traits: func(*v1.CredentialSet) engine.Traits { return engine.Traits{} },
			Words: func(*v1.CredentialSet) registry.Words {
				return registry.Words{Rotating: "wait: TestDB mints tokens", Retiring: "wait: TestDB forgets old tokens"}
			},
		},
	})
}

func TestRegisteredBackendWords(t *testing.T) {
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "t",
		Annotations: map[string]string{testOnlyAnnotation: "testonly"}}}
	cs.Status = v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r-2", KeyGeneration: 1}
	if got, want := NextStep(cs), "wait: TestDB mints tokens"; got != want {
		t.Errorf("NextStep = %q, want %q", got, want)
	}
	cs.Status.ResetPending = true
	if got, want := NextStep(cs), "wait: resetting TestDB to the current tokens after the consumers rolled back"; got != want {
		t.Errorf("NextStep = %q, want %q", got, want)
	}
	// Its traits reach the engine: applied in place, the rotation cannot
	// be rolled back.
	cs.Status = v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r-2", KeyGeneration: 1, RotateApplied: true}
	if _, err := abortable(cs); err == nil || !strings.Contains(err.Error(), "replaced the tokens in place (TestDB InPlace)") {
		t.Errorf("abortable = %v, want the in-place refusal in TestDB's words", err)
	}
}
