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

// CheckTargets refuses (*SpecError), before anything is done, a target of
// cs that cannot be written: an identity its backend does not have, a
// format unknown or refusing the set, an entity no format of the target
// reads.
func CheckTargets(cs *v1.CredentialSet) error {
	for _, t := range cs.Spec.Distribution {
		if err := CheckTarget(cs, t); err != nil {
			return err
		}
		f, registered := FormatFor(t.Format)
		switch {
		case registered && (t.Entity == "" || f.Entity):
			if err := f.Check(cs, t); err != nil {
				return err
			}
		case registered, t.Format == "" || t.Format == v1.FormatNative:
			if t.Entity != "" {
				return &SpecError{Msg: fmt.Sprintf("distribution target %s/%s names entity %s without a %s format: set format %s, or remove entity",
					t.Namespace, t.Name, t.Entity, oneOf(entityFormats()), oneOf(entityFormats()))}
			}
		default:
			return &SpecError{Msg: fmt.Sprintf("distribution target %s/%s: unknown format %q (%s)", t.Namespace, t.Name, t.Format, FormatNames())}
		}
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
