package naming

import (
	"fmt"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// CephCSIEntity is the entity a target in a ceph-csi format serves: the
// one it names, or the set's only one. Admission refuses every other case
// (CEL on CredentialSetSpec); the error says what to fix for a spec that
// did not pass there.
func CephCSIEntity(cs *v1.CredentialSet, t v1.SecretTarget) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("distribution target %s/%s has format %s: %s", t.Namespace, t.Name, t.Format, why)
	}
	if cs.Spec.Ceph == nil {
		return "", bad("it writes a cephx entity's userID and userKey, for spec.ceph sets only")
	}
	entities := cs.Spec.Ceph.Entities
	name := t.Entity
	if name == "" {
		if len(entities) != 1 {
			return "", bad(fmt.Sprintf("spec.ceph.entities has %d entities: name the one it serves in its entity", len(entities)))
		}
		name = entities[0].Name
	}
	for _, e := range entities {
		if e.Name == name {
			if !strings.HasPrefix(name, "client.") {
				return "", bad(fmt.Sprintf("%s is not a client entity (ceph-csi connects as client.<userID>)", name))
			}
			return name, nil
		}
	}
	return "", bad(fmt.Sprintf("entity %s is not in spec.ceph.entities", name))
}
