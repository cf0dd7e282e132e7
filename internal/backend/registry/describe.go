package registry

import (
	"context"
	"io"

	appsv1 "k8s.io/api/apps/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// Describe is how the kubectl plugin speaks of a backend's sets: its
// words, the traits the engine's rules depend on, what rotate --dry-run
// prints and what show reads. It works from the spec and, for a plan,
// objects of the set's namespace: it never connects to the backend, so the
// plugin needs none of the controller's machinery to use it. A part left
// out is described in neutral words (show refuses a set without
// Show.Credential).
type Describe struct {
	// Name is the backend in messages ("MySQL").
	Name string
	// Secrets is what it keeps, in messages ("passwords", "keys").
	Secrets string
	// Traits are the engine.Traits the set's backend will have, from its
	// spec alone: the plugin asks the engine's rules with them.
	Traits func(cs *v1.CredentialSet) engine.Traits
	// Resolve is the set as the operator acts on it (a preset expanded);
	// nil: the set as it is.
	Resolve func(cs *v1.CredentialSet) *v1.CredentialSet
	// Words describe what happens to old and new credentials.
	Words func(cs *v1.CredentialSet) Words
	// Plan prints rotate --dry-run's part about the backend.
	Plan func(ctx context.Context, out io.Writer, cs *v1.CredentialSet, r Reader) error
	// RenderedKeys lists the keys each Native distribution Secret gets,
	// in words; "" when the plan lists them already.
	RenderedKeys func(cs *v1.CredentialSet) string
	// MoreSecrets are Secrets besides the source and distribution ones a
	// rotation rewrites, one line each.
	MoreSecrets func(cs *v1.CredentialSet) []string
	// Then is the plan's closing line: what discard does and when.
	Then func(cs *v1.CredentialSet, d Discard) string
	// Show is what show reads and prints.
	Show Show
	// Repairs are the backend's own refusals that recover repairs (nil:
	// only the failures every backend shares).
	Repairs []Repair
	// Help is the backend's row in the commands' help; Rank orders the
	// rows, lowest first.
	Help Help
	Rank int
}

// Help is what a command does with the backend, wrapped to fit after its
// name in a help table (each line up to 62 columns); Recover is what
// recover's help says of its sets beyond the failures every backend
// shares ("" nothing). New is what a rotation makes, in the plugin's
// overview ("a RabbitMQ user"; "": Name and Secrets, "MySQL passwords").
// Check is the fix check prints when the admin lacks a right rekey's
// commands need ("": none to name).
type Help struct{ Rotate, Abort, Discard, Show, Recover, New, Check string }

// Words are the phrases messages take about a backend's credentials.
// Backends keep old credentials alive in different ways (a second
// password, an entity or a user per generation, nothing at all), so "the
// old passwords work until discard" is true of one and false of another.
type Words struct {
	// Applying is the phase Rotating in words.
	Applying string
	// Rotating is the next step while the phase is Rotating.
	Rotating string
	// BothWork says what works once a rotation is distributed.
	BothWork string
	// RetireWait says what discard waits for, with the consumer count (%s).
	RetireWait string
	// Retired says what discard did.
	Retired string
	// Retiring is the next step while discard finishes.
	Retiring string
	// AutoDiscard is the next step when the operator discards by itself;
	// DiscardNote follows the manual discard command.
	AutoDiscard, DiscardNote string
	// AlreadyRetired is why a rotation can no longer be rolled back.
	AlreadyRetired string
	// RollbackSafe is why abort's first steps lock no one out.
	RollbackSafe string
	// Reset is the step that makes the backend accept only the current
	// credentials again, and ResetDone says it happened.
	Reset, ResetDone string
	// SourceNote says how new secrets reach the source Secret.
	SourceNote string
}

// Reader is what a plan may read: objects of the set's namespace.
type Reader interface {
	// StatefulSet reads StatefulSet name (a NotFound error when absent).
	StatefulSet(ctx context.Context, name string) (*appsv1.StatefulSet, error)
}

// Discard is how the set's old credentials are discarded: by the
// operator (Auto), by a person although the policy asks for the operator
// (Held: no consumer is declared), or by a person (neither).
type Discard struct {
	Auto, Held bool
	// Command is the discard command for this set.
	Command string
}

// When is the common start of a plan's closing line.
func (d Discard) When() string {
	switch {
	case d.Auto:
		return "once every consumer rolled out and the grace period passed, the rotation completes automatically (discardPolicy AfterRollout)"
	case d.Held:
		return "once every client uses the new credentials, run " + d.Command + " (discardPolicy AfterRollout, but no consumer is declared, so the operator does not discard by itself)"
	}
	return "once consumers rolled out and work, run " + d.Command + " (discardPolicy Manual)"
}

// OneOf is "a, b or c".
func OneOf(s []string) string { return oneOf(s) }
