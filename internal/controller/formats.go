package controller

import (
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/naming"
)

// targetData is what target t holds, from data, the backend's rendering of
// the set's secrets (Native). A CephCSI target gets its one entity's id
// and key from the Ceph backend's E.id and E.key.
func targetData(cs *v1.CredentialSet, t v1.SecretTarget, data map[string][]byte) (map[string][]byte, error) {
	if !t.Format.CephCSI() {
		return data, nil
	}
	entity, err := CephCSIEntity(cs, t)
	if err != nil {
		return nil, err
	}
	id, key := data[naming.CephIDKey(entity)], data[naming.CephKeyKey(entity)]
	if len(id) == 0 || len(key) == 0 {
		return nil, fmt.Errorf("distribution target %s/%s: nothing was rendered for entity %s", t.Namespace, t.Name, entity)
	}
	out := map[string][]byte{naming.CephCSIUserID: id, naming.CephCSIUserKey: key}
	if t.Format == v1.FormatCephCSIWithAdmin {
		out[naming.CephCSIAdminID], out[naming.CephCSIAdminKey] = id, key
	}
	return out, nil
}

// CephCSIEntity is the entity a CephCSI target serves; a target it
// cannot serve is a spec problem for the user to fix.
func CephCSIEntity(cs *v1.CredentialSet, t v1.SecretTarget) (string, error) {
	e, err := naming.CephCSIEntity(cs, t)
	if err != nil {
		return "", &errSpec{err.Error()}
	}
	return e, nil
}

// checkTargetFormats refuses, before anything is done, a target whose
// format cannot be written for this set.
func checkTargetFormats(cs *v1.CredentialSet) error {
	for _, t := range cs.Spec.Distribution {
		switch {
		case t.Format.CephCSI():
			if _, err := CephCSIEntity(cs, t); err != nil {
				return err
			}
		case t.Format != "" && t.Format != v1.FormatNative:
			return &errSpec{fmt.Sprintf("distribution target %s/%s: unknown format %q (Native, CephCSI or CephCSIWithAdmin)", t.Namespace, t.Name, t.Format)}
		case t.Entity != "":
			return &errSpec{fmt.Sprintf("distribution target %s/%s names entity %s without a CephCSI format: set format CephCSI, or remove entity", t.Namespace, t.Name, t.Entity)}
		}
	}
	return nil
}
