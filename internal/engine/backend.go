package engine

import (
	"context"
	"errors"
	"fmt"
)

// Secrets maps a source Secret key (e.g. ADMIN_PASSWORD) to its value. A
// backend may keep more than the secret proper under its keys (a RabbitMQ
// generation's user name, a cephx keyring naming its entity): everything a
// consumer needs to log in as that generation.
type Secrets map[string]string

// Traits say how a backend's secrets come to exist and how long the old
// ones stay valid; the engine sequences every backend by them alone.
type Traits struct {
	// ReadBack: the backend mints secrets itself and hands them back (cephx
	// `auth rotate`, `auth get-or-create`). Apply runs before the source
	// Secret holds them, and after a crash Apply reads them back instead of
	// minting again. Otherwise rekey mints them (NewSecrets) and stores them
	// before any backend learns them, so a crash never leaves a backend
	// accepting a secret nobody can recover.
	ReadBack bool
	// Overlap: between Apply and Retire both the current and the pending
	// secrets are valid. Without it (in-place rotation) Apply invalidates
	// the current secrets at once, so a rotation that applied can only
	// complete, never roll back.
	Overlap bool
	// AddsAtRest: Provision, run again on a provisioned set at rest,
	// creates the identities that exist nowhere yet and leaves the others
	// as they are, refusing one that exists but does not accept the secret
	// it is given. An identity added to the spec of a provisioned set is
	// then provisioned on its own (DecideAdd); without it, the spec change
	// is refused.
	AddsAtRest bool
}

// Backend is what a credential store supplies to the engine. Every method
// must be idempotent: after a crash the engine calls it again, and the
// backend asks the store what is already applied instead of trusting the
// engine's memory.
type Backend interface {
	// Keys are the source Secret keys of the identities that rotate.
	Keys() []string
	Traits() Traits
	// NewSecrets returns fresh secrets for every key for generation gen.
	// Only called when !ReadBack.
	NewSecrets(gen int64) (Secrets, error)
	// Provision makes every identity exist and accept cur, and returns the
	// secrets as the backend holds them. cur lacks the keys nobody holds
	// yet: a ReadBack backend mints (or reads back) those; others are
	// always given every key.
	Provision(ctx context.Context, cur Secrets) (Provisioned, error)
	// Precheck refuses (with a *Refusal) to start a rotation the backend
	// cannot carry out safely.
	Precheck(ctx context.Context, cur Secrets) error
	// Apply makes generation gen's secrets valid everywhere (and, with
	// Overlap, keeps cur valid too). pending is what the source Secret
	// holds for it: nil for a ReadBack backend that has not handed its
	// secrets back yet. It returns the pending secrets as the backend now
	// holds them, which the engine stores when they differ.
	Apply(ctx context.Context, cur, pending Secrets, gen int64) (Secrets, error)
	// Retire makes cur invalid everywhere (as far as the backend's
	// retention allows); pending stays valid.
	Retire(ctx context.Context, cur, pending Secrets) error
	// Reset makes cur the only valid secret everywhere: the rollback of a
	// rotation, once no consumer uses anything else.
	Reset(ctx context.Context, cur Secrets) error
	// Verify refuses (with a *Refusal, reason PendingRejected) secrets the
	// backend does not accept everywhere. Distribution calls it before it
	// changes what consumers are given: a source Secret edited by hand
	// must never reach them.
	Verify(ctx context.Context, s Secrets) error
	// Render is what the distribution Secrets hold for secrets s (keys and
	// values); it must not fail for secrets the backend produced.
	Render(s Secrets) (map[string][]byte, error)
	// Version is the backend's software version, the one that mints keys
	// now (for the WithVersionUpgrade policy and status.keyVersion). cur
	// are the current secrets, for a backend that logs in with one of them.
	Version(ctx context.Context, cur Secrets) (string, error)
}

// Provisioned is what Provision found or made.
type Provisioned struct {
	Secrets Secrets
	// Generation the identities carry (e.g. a suffix in their names), 0
	// when the backend cannot tell; the engine then starts at 1.
	Generation int64
	// Adopted: the secrets existed before rekey (found in the backend or
	// handed over by the user), so the version that minted them is unknown
	// and status.keyVersion stays empty.
	Adopted bool
}

// Inventory is implemented by backends that keep prior generations
// (overlapping rotation): how many prior identities still exist, read from
// the backend itself (status.priorKeyCount).
type Inventory interface {
	Priors(ctx context.Context, cur Secrets) (int, error)
}

// Scoped is implemented by backends whose identities live in a cluster
// that several endpoints may reach: ClusterID names the cluster, so that
// two sets making the same users there are refused, and retirement waits
// for the consumers that can hold the retiring user. An error means the
// cluster cannot be identified, and then nothing is retired.
type Scoped interface {
	ClusterID(ctx context.Context) (string, error)
}

// DiscardGate is implemented by backends whose retirement touches several
// instances: CheckDiscardHealth refuses (a *Refusal, or an unreachable
// instance) to start a discard that could stop half way. The engine asks
// it before it records that a discard started, after which the rotation
// can only complete.
type DiscardGate interface {
	CheckDiscardHealth(ctx context.Context, cur, pending Secrets) error
}

// Repairer is implemented by backends whose instances can lose what Apply
// made while the rotation is Distributed (a replica rebuilt from an empty
// data directory). RepairPending makes every instance accept both cur and
// pending again, idempotently; the engine calls it on every reconcile in
// Distributed until the discard starts, because nothing else re-applies
// phase 1 then and consumers reach every instance.
type Repairer interface {
	RepairPending(ctx context.Context, cur, pending Secrets) error
}

// Narrower is implemented by backends that can act on some of their
// identities only. An identity added to the spec while a rotation or a
// rollback is under way is left out of it (Without the keys it lacks)
// until it ends, then added (DecideAdd). ok is false when it cannot be
// left out (the admin the backend logs in as).
type Narrower interface {
	Without(keys []string) (b Backend, ok bool)
}

// IdleRepairer is implemented by backends whose instances can leave and
// return with what they held then (a StatefulSet scaled in, then out, from
// its old volumes), or rebuilt empty, while no rotation runs. RepairIdle
// sets such an instance back to cur wherever the backend's own records
// say it missed what the set did since, and reports what it cannot tell
// from a person's change; the controller calls it on every reconcile of an
// Idle set. It must write nothing when nothing is wrong.
type IdleRepairer interface {
	RepairIdle(ctx context.Context, cur Secrets) error
}

// Releaser is implemented by backends that keep more than the current
// secrets while no rotation is in flight (prior generations), or that mark
// what they manage. Release runs when a set with deletionPolicy Discard is
// deleted, never while a rotation is in flight: afterwards cur is the only
// valid secret of the identities rekey made for the set (prior generations
// and leftovers of interrupted rotations are gone), and the identities cur
// names stay, no longer marked as the set's, so that a later set may adopt
// them. It changes nothing rekey did not make for this very set, and is
// idempotent.
type Releaser interface {
	Release(ctx context.Context, cur Secrets) error
}

// Deprovisioner is implemented by backends that can tell the identities
// rekey created for a set from those it adopted. Deprovision runs when a
// set with deletionPolicy Delete is deleted, once its declared consumers
// are gone and no rotation is in flight: every identity rekey created for
// the set goes; one it adopted (it existed before rekey) stays and is
// released as Release does. Idempotent.
type Deprovisioner interface {
	Deprovision(ctx context.Context, cur Secrets) error
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

// TransportReporter is implemented by backends whose connections carry
// credentials over a network. InsecureTransport says, in words a user can
// act on, why those connections are not verified (TLS without a verified
// certificate, or plaintext) and which field to change; "" when they are
// verified. The controller turns a non-empty answer into a Warning Event
// and the TransportVerified condition.
type TransportReporter interface {
	InsecureTransport() string
}
