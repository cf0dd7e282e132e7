package engine

import (
	"context"
	"errors"
	"fmt"
)

// Secrets maps a source Secret key (e.g. ADMIN_PASSWORD) to its value.
type Secrets map[string]string

// Backend is what a credential store supplies to the engine. Every method
// must be idempotent: after a crash the engine calls it again, and the
// backend asks the store what is already applied instead of trusting the
// engine's memory.
type Backend interface {
	// Keys are the source Secret keys of the identities that rotate.
	Keys() []string
	// NewSecrets returns fresh secrets for every key, for the next
	// generation. They are stored before any backend learns them.
	NewSecrets() (Secrets, error)
	// Provision makes every identity exist and accept cur (generation 1).
	Provision(ctx context.Context, cur Secrets) error
	// Precheck refuses (with a *Refusal) to start a rotation the backend
	// cannot carry out safely.
	Precheck(ctx context.Context, cur Secrets) error
	// Apply makes pending valid while cur stays valid, everywhere.
	Apply(ctx context.Context, cur, pending Secrets) error
	// Retire makes cur invalid everywhere; pending stays valid.
	Retire(ctx context.Context, cur, pending Secrets) error
	// Reset makes cur the only valid secret everywhere: the rollback of a
	// rotation, once no consumer uses anything else.
	Reset(ctx context.Context, cur Secrets) error
}

// Refusal is a backend's reason not to proceed: a Warning Event and a
// condition carry its Reason and Message (which names the next step).
type Refusal struct {
	Reason  string
	Message string
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Message }

// UnreachableError says which instance could not be reached; the health
// gate stops the phase and resumes when it answers again.
type UnreachableError struct {
	Instance string
	Err      error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("instance %s unreachable: %v", e.Instance, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// AsRefusal returns the refusal wrapped in err, if any.
func AsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

// AsUnreachable returns the unreachable instance wrapped in err, if any.
func AsUnreachable(err error) (*UnreachableError, bool) {
	var u *UnreachableError
	ok := errors.As(err, &u)
	return u, ok
}
