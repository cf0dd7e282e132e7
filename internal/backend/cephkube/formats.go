package cephkube

import (
	"fmt"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
)

// Keys of a distribution Secret in one of ceph-csi's formats, as ceph-csi
// reads them (internal/util/credentials.go there): the id is passed to
// --id (the entity without "client."), the key is written to a key file
// for --keyfile, so it is the bare base64 key, not a keyring.
const (
	CSIUserID   = "userID"
	CSIUserKey  = "userKey"
	CSIAdminID  = "adminID"
	CSIAdminKey = "adminKey"
)

func registerFormats() {
	for _, f := range []v1.SecretFormat{v1.FormatCephCSI, v1.FormatCephCSIWithAdmin} {
		registry.RegisterFormat(registry.Format{Name: f, Check: checkCSI, Render: renderCSI})
	}
}

func checkCSI(cs *v1.CredentialSet, t v1.SecretTarget) error {
	_, err := CSIEntity(cs, t)
	return err
}

// renderCSI gives a CephCSI target its one entity's id and key from the
// Ceph backend's E.id and E.key.
func renderCSI(cs *v1.CredentialSet, t v1.SecretTarget, data map[string][]byte) (map[string][]byte, error) {
	entity, err := CSIEntity(cs, t)
	if err != nil {
		return nil, err
	}
	id, key := data[entity+".id"], data[entity+".key"]
	if len(id) == 0 || len(key) == 0 {
		return nil, fmt.Errorf("distribution target %s/%s: nothing was rendered for entity %s", t.Namespace, t.Name, entity)
	}
	out := map[string][]byte{CSIUserID: id, CSIUserKey: key}
	if t.Format == v1.FormatCephCSIWithAdmin {
		out[CSIAdminID], out[CSIAdminKey] = id, key
	}
	return out, nil
}

// CSIEntity is the entity a CephCSI target serves: the one it names, or
// the set's only one. Admission refuses every other case (CEL on
// CredentialSetSpec); this repeats it for a spec that did not pass there.
func CSIEntity(cs *v1.CredentialSet, t v1.SecretTarget) (string, error) {
	bad := func(why string) error {
		return &registry.SpecError{Msg: fmt.Sprintf("distribution target %s/%s has format %s: %s", t.Namespace, t.Name, t.Format, why)}
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
