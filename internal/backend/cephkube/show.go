package cephkube

import (
	"fmt"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
)

// credential is what Render writes for one entity, as show prints it.
func credential(cs *v1.CredentialSet, p registry.Pick) (registry.Credential, error) {
	e, err := pickEntity(cs.Name, entityNames(cs), p.Identity)
	if err != nil {
		return registry.Credential{}, err
	}
	c := registry.Credential{Who: "entity " + e,
		Note: "this is its new key (the old one stopped working when Ceph rotated it: InPlace)"}
	if overlapping(cs) {
		c.Note = fmt.Sprintf("this is the key of its new entity %s.%d (the prior entity works until discard, and after it as keepPriorKeyCount %d says)",
			e, engine.TargetGeneration(cs.Spec.Rotation, cs.Status), cs.Spec.Ceph.PriorKeysKept())
	}
	switch p.Format {
	case "keyring":
		c.Keys = []string{ceph.KeyringKey(e)}
		c.Render = func(v []string) (string, error) { return registry.EndLine(v[0]), nil }
	case "env":
		c.Keys = []string{ceph.NameKey(e), ceph.IDKey(e), ceph.KeyKey(e)}
		c.Fields = func(v []string) []string { return []string{"CEPH_NAME", v[0], "CEPH_ID", v[1], "CEPH_KEY", v[2]} }
	default:
		c.Keys, c.Render = []string{ceph.KeyKey(e)}, registry.PlainLine
	}
	return c, nil
}

// entityNames are the spec's entities, as --entity names them.
func entityNames(cs *v1.CredentialSet) []string {
	var names []string
	for _, e := range cs.Spec.Ceph.Entities {
		names = append(names, e.Name)
	}
	return names
}

// pickEntity finds --entity among the spec's entities; without it, a
// single entity is the answer and several are listed. A generation's
// name (client.csi.3) is not an entity of the spec: the Secret keys are
// named after the spec's.
func pickEntity(set string, names []string, want string) (string, error) {
	switch {
	case want == "" && len(names) == 1:
		return names[0], nil
	case want == "":
		return "", fmt.Errorf("credentialset %q has %d entities: choose one with --entity (%s)", set, len(names), strings.Join(names, ", "))
	case slices.Contains(names, want):
		return want, nil
	}
	return "", fmt.Errorf("credentialset %q has no entity %q: use one of %s", set, want, strings.Join(names, ", "))
}

// noteCSI says, in a plan, what a ceph-csi target holds.
func noteCSI(cs *v1.CredentialSet, t v1.SecretTarget) string {
	e, err := ceph.CSIEntity(cs, t)
	if err != nil {
		return " (" + err.Error() + ")"
	}
	keys := "userID, userKey"
	if t.Format == v1.FormatCephCSIWithAdmin {
		keys += ", adminID, adminKey"
	}
	return fmt.Sprintf(" (%s: %s of %s's current generation)", t.Format, keys, e)
}

// unreadCSI says where show's user finds the key of a ceph-csi target.
func unreadCSI(t v1.SecretTarget) string {
	return fmt.Sprintf("a ceph-csi format (userID/userKey), which show does not read: read the key with kubectl get secret -n %s %s -o jsonpath='{.data.userKey}' | base64 -d", t.Namespace, t.Name)
}
