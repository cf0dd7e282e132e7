// Package naming holds the names rekey gives what other programs and
// people see, whatever the backend: the Secrets it keeps, the labels,
// annotations and finalizers it sets. The controller and the backends
// write them, the plugin reads them; both take them from here, so the two
// can never drift apart. Names only one backend gives (the keys of its
// rendered Secrets, the identity of each generation) are in that
// backend's package. It imports nothing of rekey but the API types.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
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
