package ceph

import (
	"fmt"
	"strconv"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// The names a Ceph set gives what other programs and people see: the
// temporary admin that rotates the admin's own key and the Secret that
// keeps its keyring meanwhile, the keys each entity is rendered as, the
// entity of each generation. The backend writes them and the plugin's
// description of Ceph sets (cephkube) reads them, both from here.
const (
	// RotatorEntity is the temporary admin that rotates the admin's
	// key: the admin cannot rotate its own key and store the result
	// atomically, so the rotator, stored first, stays able to finish the
	// job whatever happens in between.
	RotatorEntity = "client.admin-rotator"
	// RotatorKeyringKey holds the rotator's keyring in its Secret.
	RotatorKeyringKey = "keyring"
)

// RotatorSecretName is where the temporary rotator's keyring lives while
// the admin key rotates: next to the admin keyring Secret.
func RotatorSecretName(adminSecret string) string { return adminSecret + "-rotator" }

// Keys a Ceph set's distribution Secrets hold for entity e (a name of
// spec.ceph.entities): the keyring file, the bare key, the full name of
// the generation served (client.csi.3) and its id (csi.3, what --id and
// ceph-csi's userID take).
func KeyringKey(e string) string { return e + ".keyring" }
func KeyKey(e string) string     { return e + ".key" }
func NameKey(e string) string    { return e + ".name" }
func IDKey(e string) string      { return e + ".id" }

// GenerationEntity names generation gen of entity base under
// Overlapping rotation: base itself is generation 0 (a key that existed
// before rekey), base.N is generation N.
func GenerationEntity(base string, gen int64) string {
	if gen == 0 {
		return base
	}
	return base + "." + strconv.FormatInt(gen, 10)
}

// Keys of a distribution Secret in one of ceph-csi's formats, as ceph-csi
// reads them: the id is passed to --id (the entity without "client."),
// the key is written to a key file for --keyfile, so it is the bare
// base64 key, not a keyring.
const (
	CSIUserID   = "userID"
	CSIUserKey  = "userKey"
	CSIAdminID  = "adminID"
	CSIAdminKey = "adminKey"
)

// CSIEntity is the entity a target in a ceph-csi format serves: the one
// it names, or the set's only one. Admission refuses every other case
// (CEL on CredentialSetSpec); the error says what to fix for a spec that
// did not pass there.
func CSIEntity(cs *v1.CredentialSet, t v1.SecretTarget) (string, error) {
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
