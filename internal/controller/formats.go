package controller

import (
	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
)

// targetData is what target t holds, from data, the backend's rendering of
// the set's secrets (Native): the identity t names, if any, in t's format.
func targetData(cs *v1.CredentialSet, t v1.SecretTarget, data map[string][]byte) (map[string][]byte, error) {
	return registry.TargetData(cs, t, data)
}

// checkTargetFormats refuses, before anything is done, a target that
// cannot be written for this set (registry.CheckTargets: the formats and
// what they read are the backends').
func checkTargetFormats(cs *v1.CredentialSet) error { return registry.CheckTargets(cs) }
