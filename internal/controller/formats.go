package controller

import (
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
)

// targetData is what target t holds, from data, the backend's rendering of
// the set's secrets (Native): the identity t names, if any, in t's format.
func targetData(cs *v1.CredentialSet, t v1.SecretTarget, data map[string][]byte) (map[string][]byte, error) {
	return registry.TargetData(cs, t, data)
}

// checkTargetFormats refuses, before anything is done, a target whose
// format cannot be written for this set.
func checkTargetFormats(cs *v1.CredentialSet) error {
	for _, t := range cs.Spec.Distribution {
		if err := registry.CheckTarget(cs, t); err != nil {
			return err
		}
		f, registered := registry.FormatFor(t.Format)
		switch {
		case registered:
			if err := f.Check(cs, t); err != nil {
				return err
			}
		case t.Format != "" && t.Format != v1.FormatNative:
			return &errSpec{Msg: fmt.Sprintf("distribution target %s/%s: unknown format %q (%s)", t.Namespace, t.Name, t.Format, registry.FormatNames())}
		case t.Entity != "":
			return &errSpec{Msg: fmt.Sprintf("distribution target %s/%s names entity %s without a CephCSI format: set format CephCSI, or remove entity", t.Namespace, t.Name, t.Entity)}
		}
	}
	return nil
}
