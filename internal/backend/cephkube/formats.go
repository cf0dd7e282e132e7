package cephkube

import (
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/backend/registry"
)

func registerFormats() {
	for _, f := range []v1.SecretFormat{v1.FormatCephCSI, v1.FormatCephCSIWithAdmin} {
		registry.RegisterFormat(registry.Format{Name: f, Check: checkCSI, Render: renderCSI, Note: noteCSI, Unread: unreadCSI, Entity: true})
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
	id, key := data[ceph.IDKey(entity)], data[ceph.KeyKey(entity)]
	if len(id) == 0 || len(key) == 0 {
		return nil, fmt.Errorf("distribution target %s/%s: nothing was rendered for entity %s", t.Namespace, t.Name, entity)
	}
	out := map[string][]byte{ceph.CSIUserID: id, ceph.CSIUserKey: key}
	if t.Format == v1.FormatCephCSIWithAdmin {
		out[ceph.CSIAdminID], out[ceph.CSIAdminKey] = id, key
	}
	return out, nil
}

// CSIEntity is the entity a CephCSI target serves (ceph.CSIEntity);
// a target it cannot serve is a spec problem for the user to fix.
func CSIEntity(cs *v1.CredentialSet, t v1.SecretTarget) (string, error) {
	e, err := ceph.CSIEntity(cs, t)
	if err != nil {
		return "", &registry.SpecError{Msg: err.Error()}
	}
	return e, nil
}
