package registry

import (
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TargetHook is how a backend serves a distribution target that names one
// login of its set (distribution[].login): the target holds that
// identity's keys of the Native rendering, under the names an application
// of that one identity reads.
type TargetHook struct {
	// Check refuses (*SpecError) an identity the set does not have.
	Check func(cs *v1.CredentialSet, t v1.SecretTarget) error
	// Key is where t holds the Native rendering's key k; false: t does
	// not hold it.
	Key func(cs *v1.CredentialSet, t v1.SecretTarget, k string) (string, bool)
	// Note says, in a plan, what t holds.
	Note func(cs *v1.CredentialSet, t v1.SecretTarget) string
}

// hook is the target hook of cs's backend for t, nil when t holds the
// whole rendering.
func hook(cs *v1.CredentialSet, t v1.SecretTarget) *TargetHook {
	e, ok := For(cs)
	if !ok || e.Target == nil || t.Login == "" {
		return nil
	}
	return e.Target
}

// NamesOne tells whether t carries one identity of cs rather than all.
func NamesOne(cs *v1.CredentialSet, t v1.SecretTarget) bool { return hook(cs, t) != nil }

// CheckTarget refuses (*SpecError) a target naming an identity cs's
// backend does not have.
func CheckTarget(cs *v1.CredentialSet, t v1.SecretTarget) error {
	if h := hook(cs, t); h != nil {
		return h.Check(cs, t)
	}
	if e, ok := For(cs); ok && t.Login != "" {
		// Admission refuses it too; a set admitted before that rule
		// must not silently get every identity.
		return &SpecError{Msg: fmt.Sprintf("distribution target %s/%s names login %s, but a %s set has no logins to pick from: remove login",
			t.Namespace, t.Name, t.Login, e.Field)}
	}
	return nil
}

// TargetKey is where t holds key k of the backend's Native rendering
// (false: it does not hold it).
func TargetKey(cs *v1.CredentialSet, t v1.SecretTarget, k string) (string, bool) {
	if h := hook(cs, t); h != nil {
		return h.Key(cs, t, k)
	}
	return k, true
}

// TargetData is what t holds, from data (the backend's Native rendering):
// the identity it names, if any, then in its format.
func TargetData(cs *v1.CredentialSet, t v1.SecretTarget, data map[string][]byte) (map[string][]byte, error) {
	if h := hook(cs, t); h != nil {
		one := map[string][]byte{}
		for k, v := range data {
			if to, ok := h.Key(cs, t, k); ok {
				one[to] = v
			}
		}
		data = one
	}
	f, ok := FormatFor(t.Format)
	if !ok {
		return data, nil
	}
	return f.Render(cs, t, data)
}

// TargetNote says, in a plan, what t holds when that is not the whole
// Native rendering ("" when it is).
func TargetNote(cs *v1.CredentialSet, t v1.SecretTarget) string {
	if h := hook(cs, t); h != nil {
		return h.Note(cs, t)
	}
	if f, ok := FormatFor(t.Format); ok {
		return f.Note(cs, t)
	}
	return ""
}
