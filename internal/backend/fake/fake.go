// Package fake is an in-memory backend for the controller's tests: it
// keeps which secret each identity accepts, fails a call on demand, and
// registers itself exactly as a real backend does, with one line. It is
// imported by tests only.
package fake

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

func init() { registry.Register(Entry) }

// Annotation selects the fake backend for a set and names its Store.
const Annotation = "fake.rekey.io/store"

// Key is the one identity a Store rotates.
const Key = "PASSWORD"

// Entry is the fake backend's registration.
var Entry = registry.Entry{
	Kind:    "fake",
	Field:   "the " + Annotation + " annotation",
	Selects: func(cs *v1.CredentialSet) bool { return cs.Annotations[Annotation] != "" },
	Build: func(_ context.Context, cs *v1.CredentialSet, _ registry.Kube, _ registry.Options) (*registry.Plan, error) {
		s, ok := stores.Load(cs.Annotations[Annotation])
		if !ok {
			return nil, &registry.SpecError{Msg: "no fake store " + cs.Annotations[Annotation]}
		}
		st := s.(*Store)
		st.mu.Lock()
		defer st.mu.Unlock()
		return &registry.Plan{Backend: st, Extra: st.extra}, nil
	},
	LockKeys: func(cs *v1.CredentialSet) []string { return []string{"fake:" + cs.Annotations[Annotation]} },
}

var stores sync.Map

// Store is one fake credential store.
type Store struct {
	traits engine.Traits
	mu     sync.Mutex
	valid  []string // the values Key accepts
	fail   map[string]error
	calls  []string
	extra  registry.ExtraSecrets
}

// New makes the Store the sets annotated with name use.
func New(name string, t engine.Traits) *Store {
	s := &Store{traits: t, fail: map[string]error{}}
	stores.Store(name, s)
	return s
}

// SetExtra gives the plans of the Store's sets Secrets of the system the
// backend serves, kept with the distribution.
func (s *Store) SetExtra(e registry.ExtraSecrets) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extra = e
}

// FailNext makes the next call of method (e.g. "Apply") return err.
func (s *Store) FailNext(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = err
}

// Allow makes Key accept value too, as a half-done change a crash left.
func (s *Store) Allow(value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.valid = append(s.valid, value)
}

// Accepts tells whether Key logs in with value now.
func (s *Store) Accepts(value string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.valid, value)
}

// Calls are the methods called so far, in order.
func (s *Store) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// call records method and returns its injected failure; s.mu is held
// after it returns.
func (s *Store) call(method string) error {
	s.mu.Lock()
	s.calls = append(s.calls, method)
	err := s.fail[method]
	delete(s.fail, method)
	return err
}

func (s *Store) Keys() []string        { return []string{Key} }
func (s *Store) Traits() engine.Traits { return s.traits }

// NewSecrets is predictable, so tests can name what a generation holds.
func (s *Store) NewSecrets(gen int64) (engine.Secrets, error) {
	return engine.Secrets{Key: Secret(gen)}, nil
}

// Secret is what NewSecrets gives generation gen.
func Secret(gen int64) string { return fmt.Sprintf("secret-g%d", gen) }

func (s *Store) Provision(_ context.Context, cur engine.Secrets) (engine.Provisioned, error) {
	defer s.mu.Unlock()
	if err := s.call("Provision"); err != nil {
		return engine.Provisioned{}, err
	}
	if cur[Key] == "" { // read-back: the store mints
		cur = engine.Secrets{Key: Secret(1)}
	}
	s.valid = []string{cur[Key]}
	return engine.Provisioned{Secrets: cur}, nil
}

func (s *Store) Precheck(_ context.Context, cur engine.Secrets) error {
	defer s.mu.Unlock()
	if err := s.call("Precheck"); err != nil {
		return err
	}
	return s.refuseUnless(cur, reason.KeyMismatch)
}

func (s *Store) Apply(_ context.Context, cur, pending engine.Secrets, gen int64) (engine.Secrets, error) {
	defer s.mu.Unlock()
	if err := s.call("Apply"); err != nil {
		return nil, err
	}
	if pending == nil { // read-back: the store mints
		pending = engine.Secrets{Key: Secret(gen)}
	}
	s.valid = []string{pending[Key]}
	if s.traits.Overlap {
		s.valid = append(s.valid, cur[Key])
	}
	return pending, nil
}

func (s *Store) Retire(_ context.Context, _, pending engine.Secrets) error {
	defer s.mu.Unlock()
	if err := s.call("Retire"); err != nil {
		return err
	}
	s.valid = []string{pending[Key]}
	return nil
}

func (s *Store) Reset(_ context.Context, cur engine.Secrets) error {
	defer s.mu.Unlock()
	if err := s.call("Reset"); err != nil {
		return err
	}
	s.valid = []string{cur[Key]}
	return nil
}

func (s *Store) Verify(_ context.Context, sec engine.Secrets) error {
	defer s.mu.Unlock()
	if err := s.call("Verify"); err != nil {
		return err
	}
	return s.refuseUnless(sec, reason.PendingRejected)
}

func (s *Store) refuseUnless(sec engine.Secrets, why reason.Reason) error {
	if !slices.Contains(s.valid, sec[Key]) {
		return &engine.Refusal{Reason: string(why), Message: Key + " is not accepted by the fake store"}
	}
	return nil
}

func (s *Store) Render(sec engine.Secrets) (map[string][]byte, error) {
	return map[string][]byte{Key: []byte(sec[Key])}, nil
}

func (s *Store) Version(context.Context, engine.Secrets) (string, error) { return "1", nil }
