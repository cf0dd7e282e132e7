package mysql

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// Ownership of users. Deleting a set with deletionPolicy Delete drops the
// users rekey created for it and only those, so the server itself says
// which ones they are: CREATE USER carries, in the same statement, the
// user attribute ownerKey = the set's UID (User_attributes.metadata in
// mysql.user, INFORMATION_SCHEMA.USER_ATTRIBUTES). A user that existed
// before rekey, or whose password the user handed over (adoptSecretRef,
// the admin's, MOCO's Secret), gets no mark. Like every other credential
// statement the mark is written with sql_log_bin=0 on each instance, so
// each instance marks the users rekey created there; deletion decides per
// user over all instances (created).
const ownerKey = "rekey.io/set"

// ownerPath is the JSON path of the mark in mysql.user.User_attributes
// (ATTRIBUTE writes under metadata).
const ownerPath = `'$.metadata."` + ownerKey + `"'`

// ownerPattern: a Kubernetes UID is a UUID. Checked before it reaches
// SQL, although it is also JSON-encoded and quoted there.
var ownerPattern = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9]{0,127}$`)

// SetOwner makes b act for the CredentialSet whose metadata.uid is uid: the
// users it creates carry uid, and Release and Deprovision act on the users
// that carry it. adopted are the source Secret keys whose passwords the
// user handed over; their users are never marked, even when rekey has to
// create them.
func (b *Backend) SetOwner(uid string, adopted []string) error {
	if !ownerPattern.MatchString(uid) {
		return fmt.Errorf("mysql: owner %q: want the CredentialSet's UID (letters, digits and '-')", uid)
	}
	b.owner = uid
	b.adopted = map[string]bool{}
	for _, k := range adopted {
		b.adopted[k] = true
	}
	return nil
}

// attribute is the quoted ATTRIBUTE literal for a JSON merge patch of a
// user's metadata (a nil value removes its key).
func attribute(patch map[string]any) string {
	j, err := json.Marshal(patch)
	if err != nil {
		panic(err) // strings and nil only
	}
	return quote(string(j))
}

// creatingAttributeFor is the mark of a user rekey is creating (see
// creatingAttribute), with owner's mark unless owner is "".
func creatingAttributeFor(owner string) string {
	if owner == "" {
		return creatingAttribute
	}
	return attribute(map[string]any{"rekey": "creating", ownerKey: owner})
}

// releasedAttribute removes the owner's mark.
var releasedAttribute = attribute(map[string]any{ownerKey: nil})
