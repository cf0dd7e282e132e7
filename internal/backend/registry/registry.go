// Package registry is where each backend makes itself known to the
// controller: which spec block selects it, how it is built for one set,
// which servers it shares with other sets, and the distribution formats it
// renders, and how the kubectl plugin describes its sets. Controller and
// plugin only iterate the registry, so adding a backend is its package plus
// one registration line.
package registry

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Entry is one backend as the controller sees it.
type Entry struct {
	// Kind names the backend in logs and lock keys ("mysql").
	Kind string
	// Field is the spec block that selects it ("spec.mysql"), for messages.
	Field string
	// Selects tells whether the set is this backend's (its spec block).
	Selects func(*v1.CredentialSet) bool
	// Build makes the backend for one reconcile of cs. Its errors are
	// *SpecError when the user must fix the spec.
	Build func(ctx context.Context, cs *v1.CredentialSet, k Kube, o Options) (*Plan, error)
	// LockKeys name the servers the set acts on: two sets sharing a key
	// are never reconciled at once. Nil: the set shares no server.
	LockKeys func(cs *v1.CredentialSet) []string
	// StatefulSets whose changes wake the set (nil: none).
	StatefulSets func(cs *v1.CredentialSet) []string
	// WritesNoSecret: Build only reads Secrets, so the controller may
	// serve each one read once per plan. A backend that rewrites a
	// Secret while building (Ceph finishing an interrupted admin key
	// rotation) leaves it false and reads afresh.
	WritesNoSecret bool
	// Describe is how the kubectl plugin speaks of the backend's sets.
	Describe Describe
	// Target serves distribution targets that carry one identity of the
	// set (distribution[].login). Nil: every target holds all of them.
	Target *TargetHook
	// Flags are the manager's flags that only this backend reads (nil:
	// none); Build finds their values in Options.Settings.
	Flags []Flag
	// Identities names what the spec makes rekey manage on the backend,
	// for messages about what a set left behind ("MySQL users app,
	// report"). It names identities, never credentials.
	Identities func(cs *v1.CredentialSet) string
}

// Plan is the backend built for one reconcile.
type Plan struct {
	Backend engine.Backend
	// NoInstances: there is no instance to act on yet (scaled to zero).
	NoInstances bool
	// Adopt are secrets the identities already have, for provisioning.
	Adopt engine.Secrets
	// InstancesAdded reports an instance that appeared since Build, so a
	// phase that just ran over the old list runs again. Nil: instances
	// change only with the spec.
	InstancesAdded func(ctx context.Context) (bool, error)
	// Extra are the Secrets beyond the set's distribution that the system
	// the backend serves reads the secrets from. Nil: none.
	Extra ExtraSecrets
}

// ExtraSecrets are Secrets, besides the set's distribution targets, that
// the system a backend serves reads its secrets from, in that system's
// form and under its ownership rules (an operator managing the servers
// reads its own Secrets, not rekey's). The controller keeps them with the
// distribution: only once the backend accepts the secrets, and before the
// targets, so that the system itself is never behind its consumers.
type ExtraSecrets interface {
	// Count is how many Secrets they are (for Events).
	Count() int
	// Stale: some of them does not hold secrets yet.
	Stale(ctx context.Context, secrets engine.Secrets) (bool, error)
	// Write gives each of them secrets, in the order they must change.
	Write(ctx context.Context, secrets engine.Secrets) error
}

// Options are manager settings some backends read.
type Options struct {
	// InstanceConcurrency bounds how many instances a phase works on at once.
	InstanceConcurrency int
	// AddressMap, when set, rewrites instance addresses (tests).
	AddressMap func(addr string) string
	// Settings are the values of the backends' manager flags (Flags).
	Settings Settings
}

// Kube is what a backend may read and write in Kubernetes for its set:
// Secrets and StatefulSets of the set's namespace, the other sets (to
// refuse clashes), the set's status, its Events. Reads are live.
type Kube interface {
	// Reader reads any object, live. A backend reads outside the set's
	// namespace only where Settings name the place.
	client.Reader
	// SecretKey is the non-empty value of key in Secret name.
	SecretKey(ctx context.Context, name, key string) (string, error)
	// Secret reads Secret name (a NotFound error when absent).
	Secret(ctx context.Context, name string) (*corev1.Secret, error)
	// StatefulSet reads StatefulSet name (a NotFound error when absent).
	StatefulSet(ctx context.Context, name string) (*appsv1.StatefulSet, error)
	// Sets lists every CredentialSet.
	Sets(ctx context.Context) ([]v1.CredentialSet, error)
	// Current is what the source Secret holds for keys; ok is false when
	// it is absent or lacks one (the reconcile reports that itself).
	Current(ctx context.Context, keys []string) (cur engine.Secrets, ok bool, err error)
	// UpdateStatus changes the set's status under optimistic locking.
	UpdateStatus(ctx context.Context, mutate func(*v1.CredentialSetStatus)) error
	// Event records an Event on the set.
	Event(typ string, why reason.Reason, action, msg string)
	// Owned: rekey created sec for this set. Claim marks it so.
	Owned(sec *corev1.Secret) bool
	Claim(sec *corev1.Secret)
	// NotOwned refuses to use sec, a role rekey did not create for this set.
	NotOwned(sec *corev1.Secret, role, remedy string) error
	// HandOver is the command that marks sec as this set's.
	HandOver(sec *corev1.Secret) string
	Create(ctx context.Context, sec *corev1.Secret) error
	Update(ctx context.Context, sec *corev1.Secret) error
	// Fence refuses (an error wrapping leader.ErrNotLeader) once this
	// manager is no longer the leader: a backend asks it right before a
	// write the engine does not sequence (upkeep while building).
	Fence(ctx context.Context) error
	// FenceTerm is this manager's leadership term (0: none): a backend
	// that can record it refuses a manager with a lower one, atomically
	// with the change it guards.
	FenceTerm() int64
}

// SpecError is a spec problem the user must fix; it is not retried fast.
type SpecError struct{ Msg string }

func (e *SpecError) Error() string { return e.Msg }

// Format renders a distribution Secret in a format other than Native.
type Format struct {
	Name v1.SecretFormat
	// Check refuses (with a *SpecError) a target this set cannot fill.
	Check func(cs *v1.CredentialSet, t v1.SecretTarget) error
	// Render is what t holds, from data (the backend's Native rendering).
	Render func(cs *v1.CredentialSet, t v1.SecretTarget, data map[string][]byte) (map[string][]byte, error)
	// Note says, in a plan, what t holds.
	Note func(cs *v1.CredentialSet, t v1.SecretTarget) string
	// Unread says why show reads no target in this format, and where
	// the secret is read instead.
	Unread func(t v1.SecretTarget) string
	// Entity: a target in this format names the entity it serves
	// (distribution[].entity); in any other, entity is refused.
	Entity bool
}

var (
	mu      sync.RWMutex
	entries []Entry
	formats = map[v1.SecretFormat]Format{}
)

// Register adds a backend; a second one of the same kind is a bug.
func Register(e Entry) {
	mu.Lock()
	defer mu.Unlock()
	for _, o := range entries {
		if o.Kind == e.Kind {
			panic(fmt.Sprintf("backend %q registered twice", e.Kind))
		}
	}
	entries = append(entries, e)
}

// RegisterFormat adds a distribution format.
func RegisterFormat(f Format) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := formats[f.Name]; dup || f.Name == "" || f.Name == v1.FormatNative {
		panic(fmt.Sprintf("format %q registered twice", f.Name))
	}
	formats[f.Name] = f
}

// Entries are the registered backends, in registration order.
func Entries() []Entry {
	mu.RLock()
	defer mu.RUnlock()
	return append([]Entry(nil), entries...)
}

// For is the backend the set selects (its spec block).
func For(cs *v1.CredentialSet) (Entry, bool) {
	for _, e := range Entries() {
		if e.Selects(cs) {
			return e, true
		}
	}
	return Entry{}, false
}

// NoBlock says which blocks a spec without a backend may set.
func NoBlock() string { return "no backend block: set " + Fields() }

// Fields lists the backends' spec blocks, "spec.a, spec.b or spec.c".
func Fields() string {
	var fields []string
	for _, e := range Entries() {
		fields = append(fields, e.Field)
	}
	return oneOf(fields)
}

// FormatFor is the registered format name (false for Native and unknown).
func FormatFor(name v1.SecretFormat) (Format, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := formats[name]
	return f, ok
}

// FormatNames lists Native and every registered format, for messages.
func FormatNames() string {
	mu.RLock()
	names := []string{}
	for n := range formats {
		names = append(names, string(n))
	}
	mu.RUnlock()
	sort.Strings(names)
	return oneOf(append([]string{string(v1.FormatNative)}, names...))
}

// entityFormats are the registered formats that read
// distribution[].entity, sorted.
func entityFormats() []string {
	mu.RLock()
	defer mu.RUnlock()
	var names []string
	for n, f := range formats {
		if f.Entity {
			names = append(names, string(n))
		}
	}
	sort.Strings(names)
	return names
}

// oneOf is "a, b or c".
func oneOf(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Summarize lists items in a message: all of them up to three, else how
// many (noun) and the first three, and where the full list is.
func Summarize(items []string, noun, where string) string {
	const shown = 3
	if len(items) <= shown {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%d %s (first: %s; %s lists them all)", len(items), noun, strings.Join(items[:shown], ", "), where)
}

// OtherSet names, in a message to cs's readers, another set that holds
// something cs asks for: by name in cs's own namespace, whose sets its
// readers already see; only as "a CredentialSet in another namespace"
// otherwise, so that a refusal is no oracle on who uses what elsewhere.
func OtherSet(cs, other *v1.CredentialSet) string {
	if other.Namespace == cs.Namespace {
		return "CredentialSet " + other.Namespace + "/" + other.Name
	}
	return "a CredentialSet in another namespace"
}
