package controller

import (
	"fmt"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Keys of a distribution Secret in one of ceph-csi's formats, as ceph-csi
// reads them (internal/util/credentials.go there): the id is passed to
// --id (the entity without "client."), the key is written to a key file
// for --keyfile, so it is the bare base64 key, not a keyring.
const (
	CephCSIUserID   = "userID"
	CephCSIUserKey  = "userKey"
	CephCSIAdminID  = "adminID"
	CephCSIAdminKey = "adminKey"
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
	id, key := data[entity+".id"], data[entity+".key"]
	if len(id) == 0 || len(key) == 0 {
		return nil, fmt.Errorf("distribution target %s/%s: nothing was rendered for entity %s", t.Namespace, t.Name, entity)
	}
	out := map[string][]byte{CephCSIUserID: id, CephCSIUserKey: key}
	if t.Format == v1.FormatCephCSIWithAdmin {
		out[CephCSIAdminID], out[CephCSIAdminKey] = id, key
	}
	return out, nil
}

// CephCSIEntity is the entity a CephCSI target serves: the one it names,
// or the set's only one. Admission refuses every other case (CEL on
// CredentialSetSpec); this repeats it for a spec that did not pass there.
func CephCSIEntity(cs *v1.CredentialSet, t v1.SecretTarget) (string, error) {
	bad := func(why string) error {
		return &errSpec{fmt.Sprintf("distribution target %s/%s has format %s: %s", t.Namespace, t.Name, t.Format, why)}
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
