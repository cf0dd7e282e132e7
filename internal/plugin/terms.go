package plugin

import (
	"cmp"
	"context"
	"fmt"
	"io"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
)

// backendOf is how messages describe cs's backend: the words, traits and
// renderings of the registered backend its spec block selects. Every
// message that says what happens to old or new credentials takes its
// words from here.
func backendOf(cs *v1.CredentialSet) registry.Describe {
	e, ok := registry.For(cs)
	if !ok {
		return unknownBackend
	}
	// A backend that leaves a part out (a test-only one) is spoken of in
	// the neutral words for that part.
	d, u := e.Describe, unknownBackend
	if d.Name == "" {
		d.Name = e.Kind
	}
	d.Secrets = cmp.Or(d.Secrets, u.Secrets)
	if d.Traits == nil {
		d.Traits = u.Traits
	}
	if d.Words == nil {
		d.Words = u.Words
	}
	if d.Plan == nil {
		d.Plan = u.Plan
	}
	if d.Then == nil {
		d.Then = u.Then
	}
	return d
}

// hasBackend: a registered backend's spec block is set.
func hasBackend(cs *v1.CredentialSet) bool {
	_, ok := registry.For(cs)
	return ok
}

// unknownBackend speaks of a set whose backend block this plugin does not
// know (admission requires one, so only a plugin older than the operator
// meets it) without claiming what that backend does.
var unknownBackend = registry.Describe{
	Name:    "the backend",
	Secrets: "credentials",
	// The operator decides with the real traits; the plugin only asks.
	Traits: func(*v1.CredentialSet) engine.Traits { return engine.Traits{Overlap: true} },
	Words: func(*v1.CredentialSet) registry.Words {
		return registry.Words{
			Applying:       "new credentials are being applied",
			Rotating:       "wait: applying new credentials",
			BothWork:       "the new credentials are distributed",
			RetireWait:     "the operator completes the rotation once every consumer has rolled out (%s now)",
			Retired:        "the rotation is complete",
			Retiring:       "wait: completing the rotation",
			AutoDiscard:    "discard happens automatically",
			AlreadyRetired: "already completed its discard",
			RollbackSafe:   "the operator rolls back only what it can without locking a consumer out",
			Reset:          "once every consumer rolled out, the backend is reset to the current credentials",
			ResetDone:      "the backend accepts the current credentials",
		}
	},
	Plan: func(context.Context, io.Writer, *v1.CredentialSet, registry.Reader) error { return nil },
	Then: func(_ *v1.CredentialSet, d registry.Discard) string { return "Then: " + d.When() + "." },
}

// termsFor are the words for cs's backend.
func termsFor(cs *v1.CredentialSet) registry.Words { return backendOf(cs).Words(cs) }

// backendName and secretWord keep messages in the backend's own terms.
func backendName(cs *v1.CredentialSet) string { return backendOf(cs).Name }

func secretWord(cs *v1.CredentialSet) string { return backendOf(cs).Secrets }

// traits are the engine.Traits of the set's backend that the plugin's
// questions to the engine depend on.
func traits(cs *v1.CredentialSet) engine.Traits { return backendOf(cs).Traits(cs) }

// targetGeneration is the generation the active rotation produces, or the
// one a rotation starting now would, as the operator computes it.
func targetGeneration(cs *v1.CredentialSet) int64 {
	return engine.TargetGeneration(cs.Spec.Rotation, cs.Status)
}

// noBackend is the error for a set without a backend block.
func noBackend(cs *v1.CredentialSet, consequence string) error {
	return fmt.Errorf("credentialset %q has no backend block (%s), so %s", cs.Name, registry.Fields(), consequence)
}
