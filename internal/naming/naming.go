// Package naming holds the names rekey gives what other programs and
// people see: the Secrets it keeps, the labels, annotations and
// finalizers it sets, the keys of the Secrets it renders and the
// identities each generation gets. The controller and the backends write
// them, the plugin reads them; both take them from here, so the two can
// never drift apart. It imports nothing of rekey but the API types.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Labels and annotations on the Secrets rekey writes.
const (
	ManagedByLabel       = "app.kubernetes.io/managed-by"
	ManagedByValue       = "rekey"
	CredentialSetAnnot   = "rekey.io/credential-set"
	GenerationAnnotation = "rekey.io/key-generation"
	// CredentialSetUIDAnnot marks a Secret as created by rekey for the set
	// with this UID. Names can be reused (a set deleted and created again,
	// a Secret made by someone else); a UID cannot, so it is what rekey
	// trusts before it adopts or overwrites anything.
	CredentialSetUIDAnnot = "rekey.io/credential-set-uid"
	// SecretHashAnnotation on distributed Secrets lets outside automation
	// record which distribution it deployed, to acknowledge exactly that.
	SecretHashAnnotation = "rekey.io/secret-hash"
)

// SourceSecretName is the source Secret of a set in the operator's
// namespace; dots cannot occur in namespace names, so it is unambiguous.
func SourceSecretName(cs *v1.CredentialSet) string {
	return "rekey." + cs.Namespace + "." + cs.Name
}

// RestartAnnotation is the pod-template annotation that restarts a
// consumer; one per set, so a workload can consume several sets. Keys are
// limited to 63 characters after the prefix, hence the hash.
func RestartAnnotation(cs *v1.CredentialSet) string {
	sum := sha256.Sum256([]byte(cs.Namespace + "/" + cs.Name))
	name := "restart-" + cs.Name
	if len(name) > 50 {
		name = name[:50]
	}
	return "rekey.io/" + name + "-" + hex.EncodeToString(sum[:])[:8]
}

// DeprovisionFinalizer keeps a set whose backend identities rekey alone
// owns (a user per generation) until they are deleted.
const DeprovisionFinalizer = "rekey.io/deprovision"

// ConsumerFinalizerPrefix starts every ConsumerFinalizer.
const ConsumerFinalizerPrefix = "rekey.io/consumer-"

// ConsumerFinalizer is the finalizer a consumer holds on a set whose
// identities would be deleted with it: the set (and its users) stay while
// the consumer may still use them. Qualified names allow 63 characters
// after the prefix, hence the truncated name and hash.
func ConsumerFinalizer(kind v1.ConsumerKind, namespace, name string) string {
	sum := sha256.Sum256([]byte(string(kind) + "/" + namespace + "/" + name))
	short := strings.ToLower(string(kind)) + "-" + name
	if len(short) > 44 {
		short = short[:44]
	}
	return ConsumerFinalizerPrefix + strings.TrimRight(short, "-.") + "-" + hex.EncodeToString(sum[:])[:8]
}

// Ceph: the temporary admin that rotates the admin's own key, the Secret
// that keeps its keyring meanwhile, and what each entity is rendered as.
const (
	// CephRotatorEntity is the temporary admin that rotates the admin's
	// key: the admin cannot rotate its own key and store the result
	// atomically, so the rotator, stored first, stays able to finish the
	// job whatever happens in between.
	CephRotatorEntity = "client.admin-rotator"
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
func CephKeyringKey(e string) string { return e + ".keyring" }
func CephKeyKey(e string) string     { return e + ".key" }
func CephNameKey(e string) string    { return e + ".name" }
func CephIDKey(e string) string      { return e + ".id" }

// CephGenerationEntity names generation gen of entity base under
// Overlapping rotation: base itself is generation 0 (a key that existed
// before rekey), base.N is generation N.
func CephGenerationEntity(base string, gen int64) string {
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
	CephCSIUserID   = "userID"
	CephCSIUserKey  = "userKey"
	CephCSIAdminID  = "adminID"
	CephCSIAdminKey = "adminKey"
)

// RabbitMQ: a generation is a user name and its password, both needed by
// a consumer to log in; they are the source Secret's keys and the
// distribution Secrets' too.
const (
	RabbitMQUsernameKey = "username"
	RabbitMQPasswordKey = "password"
)

// RabbitMQUser names generation gen's user of base.
func RabbitMQUser(base string, gen int64) string { return base + "-g" + strconv.FormatInt(gen, 10) }
