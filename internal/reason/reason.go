// Package reason holds, in one place, every Event reason and condition
// type/reason rekey emits, so that docs, tests and the plugin agree on them.
package reason

// Reason is the Reason of an Event or a condition.
type Reason string

// Refusals and problems (Warning Events). Each message names the next step.
const (
	DualPasswordExists     Reason = "DualPasswordExists"
	RotateRefused          Reason = "RotateRefused"
	DiscardRefused         Reason = "DiscardRefused"
	DiscardSkipped         Reason = "DiscardSkipped"
	StaleRotationPending   Reason = "StaleRotationPending"
	MissingRotationPending Reason = "MissingRotationPending"
	InstanceUnreachable    Reason = "InstanceUnreachable"
	ProvisionFailed        Reason = "ProvisionFailed"
	InvalidSpec            Reason = "InvalidSpec"
	BackendError           Reason = "BackendError"
	DistributionFailed     Reason = "DistributionFailed"
	AbortSkipped           Reason = "AbortSkipped"
	PendingRejected        Reason = "PendingRejected"
	// KeyMismatch: the backend holds a key for an identity that is not the
	// one in the source Secret (changed outside rekey).
	KeyMismatch Reason = "KeyMismatch"
	// ClusterUnidentified: the backend cluster cannot be identified, so
	// nothing is retired rather than risk retiring a user another set serves.
	ClusterUnidentified Reason = "ClusterUnidentified"
	// CapsDiffer: an entity's caps in the Ceph cluster are not the spec's
	// (rekey never changes an existing entity's caps).
	CapsDiffer Reason = "CapsDiffer"
	// UsersInUse: a deleted set keeps its identities while a consumer
	// still uses them.
	UsersInUse Reason = "UsersInUse"
	// DeletionIncomplete: a deleted set let go without winding down (its
	// namespace is being deleted and the wind-down kept failing, or the
	// backend cannot be reached as the spec says): what it names was left
	// on the backend as it was.
	DeletionIncomplete Reason = "DeletionIncomplete"
	// AckIgnored: an acknowledgement was for another distribution or
	// names members the group does not have.
	AckIgnored Reason = "AckIgnored"
	// AdminRotationFailed: the admin key rotation stopped; it resumes (or
	// recovers) on the next reconcile.
	AdminRotationFailed Reason = "AdminRotationFailed"
	// InsecureTransport: the set's connections to its backend are not
	// verified (TLS without certificate verification, or plaintext), as
	// the spec explicitly asks.
	InsecureTransport Reason = "InsecureTransport"
	// NotOwned: an object rekey would change (a Secret, a backend user or
	// entity) exists but was not created by rekey for this very set.
	NotOwned Reason = "NotOwned"
	// NamespaceNotAllowed: the spec names a namespace other than the set's
	// own that has not consented, or the operator's own namespace.
	NamespaceNotAllowed Reason = "NamespaceNotAllowed"
	// ClusterUnhealthy: a phase does not start while the backend cluster
	// is unhealthy (replication stopped or failing, a clone running, an
	// instance missing from the topology); it starts by itself once healthy.
	ClusterUnhealthy Reason = "ClusterUnhealthy"
	// InPlaceUnsupported: the backend's version cannot rotate a key in
	// place; the message names the version and the alternative.
	InPlaceUnsupported Reason = "InPlaceUnsupported"
	// UnsupportedVersion: the backend's server is older than the oldest
	// version rekey's statements run on (or another product); the message
	// names the version found and the floor.
	UnsupportedVersion Reason = "UnsupportedVersion"
	// RolloutStuck: a consumer's rollout stopped making progress (its
	// progress deadline passed, it is paused, or its update strategy
	// leaves pods on the old template); rekey waits, and says so.
	RolloutStuck Reason = "RolloutStuck"
	// RotationStuck: a rotation stayed in Rotating or Distributed longer
	// than rotation.stuckAfter; the condition names what it waits for.
	RotationStuck Reason = "RotationStuck"
	// AutoDiscardHeld: the AfterRollout policy does not retire old
	// credentials without a consumer that proves the new ones are used.
	AutoDiscardHeld Reason = "AutoDiscardHeld"
	// WriteRejected: the Kubernetes API server refused one of rekey's
	// writes as invalid (a validation failure, an admission policy) — not
	// a lost race, which is retried silently.
	WriteRejected Reason = "WriteRejected"
	// MOCORotatesItself: the MOCO that manages the set's MySQLCluster
	// rotates its system users itself; rekey does nothing on that cluster.
	MOCORotatesItself Reason = "MOCORotatesItself"
	// AuthenticationFailed: the backend refused the credential rekey logs
	// in with (wrong, revoked, expired, or its account locked). It never
	// clears by itself: a person fixes the credential or the account, and
	// a retry with the same credential only repeats the failure (and, on a
	// server with a failed-login limit, keeps the account locked).
	AuthenticationFailed Reason = "AuthenticationFailed"
	// PermissionDenied: the backend accepted rekey's credential, but it
	// lacks a privilege the step needs; the message names it when the
	// backend's answer tells.
	PermissionDenied Reason = "PermissionDenied"
	// PreflightFailed: a rotation did not start because a check failed
	// (an instance's certificate, a missing privilege, a consumer that
	// does not exist); the message names the first few, kubectl rekey
	// check lists them all. It holds until the set changes.
	PreflightFailed Reason = "PreflightFailed"
	// MOCONotReady: MOCO has not (or not yet) made what a moco set needs
	// (the MySQLCluster, its controller Secret with all 8 passwords), or
	// this installation of rekey does not serve MOCO clusters.
	MOCONotReady Reason = "MOCONotReady"
)

// Progress (Normal Events).
const (
	Provisioned       Reason = "Provisioned"
	RotationStarted   Reason = "RotationStarted"
	RotateApplied     Reason = "RotateApplied"
	Distributed       Reason = "Distributed"
	ConsumerRestarted Reason = "ConsumerRestarted"
	WaitingForRollout Reason = "WaitingForRollout"
	DiscardApplied    Reason = "DiscardApplied"
	RotationCompleted Reason = "RotationCompleted"
	RotationAborted   Reason = "RotationAborted"
	RecoveryStarted   Reason = "RecoveryStarted"
	ResetApplied      Reason = "ResetApplied"
	// PolicyTriggered: the rotation policy started a rotation.
	PolicyTriggered Reason = "PolicyTriggered"
	// OrphanRemoved: an identity left by an interrupted rotation was
	// found in the backend and removed.
	OrphanRemoved Reason = "OrphanRemoved"
	// PriorKeysRetired: prior generations beyond keepPriorKeyCount removed.
	PriorKeysRetired Reason = "PriorKeysRetired"
	// UnusedKeysRemoved: listed unused bootstrap keys were deleted.
	UnusedKeysRemoved Reason = "UnusedKeysRemoved"
	// AdminKeyRotated: the operator's admin key was rotated.
	AdminKeyRotated Reason = "AdminKeyRotated"
	// AdminRotationRecovered: an interrupted admin key rotation was resolved.
	AdminRotationRecovered Reason = "AdminRotationRecovered"
	// ConsumerMoved: a consumer (or group member batch) moved to the
	// current credentials.
	ConsumerMoved Reason = "ConsumerMoved"
	// CoverageReset: the distributed credentials changed, so every
	// consumer must move again.
	CoverageReset Reason = "CoverageReset"
	// UserRetired: an old identity was deleted from the backend.
	UserRetired Reason = "UserRetired"
	// Deprovisioned: a set deleted with deletionPolicy Delete: the
	// identities rekey created were removed.
	Deprovisioned Reason = "Deprovisioned"
	// Released: a set deleted with deletionPolicy Discard: only its
	// current credentials stay valid, no longer marked as rekey's.
	Released Reason = "Released"
	// Retained: a set deleted with deletionPolicy Retain: rekey let go
	// and changed nothing.
	Retained Reason = "Retained"
	// DeletionWaiting: a deleted set finishes its rotation in flight first.
	DeletionWaiting Reason = "DeletionWaiting"
)

// Condition types.
const (
	CondReady           = "Ready"
	CondRotating        = "Rotating"
	CondRolloutComplete = "RolloutComplete"
	CondDegraded        = "Degraded"
	// CondTransportVerified: every connection that carries credentials
	// verifies the server (False names the spec field that turns it off).
	CondTransportVerified = "TransportVerified"
	// CondRotationStuck: True while a rotation has stayed active longer
	// than rotation.stuckAfter.
	CondRotationStuck = "RotationStuck"
	// CondCapsMatch: every Ceph entity's caps in the cluster are the
	// spec's (False: CapsDiffer names each difference).
	CondCapsMatch = "CapsMatch"
)

// Condition reasons that are not also Event reasons.
const (
	Idle            Reason = "Idle"
	InProgress      Reason = "InProgress"
	Healthy         Reason = "Healthy"
	RolloutPending  Reason = "RolloutPending"
	AllRolledOut    Reason = "AllRolledOut"
	NoConsumers     Reason = "NoConsumers"
	NotProvisioned  Reason = "NotProvisioned"
	AwaitingDiscard Reason = "AwaitingDiscard"
	Verified        Reason = "Verified"
	CapsEqual       Reason = "CapsEqual"
)

// NeedsPerson reports whether a problem of reason r cannot clear by
// itself: retrying with nothing changed (the spec, the Secrets it names)
// only repeats it. For AuthenticationFailed every retry is also one more
// refused login, which a server with a failed-login limit counts.
func NeedsPerson(r Reason) bool {
	switch r {
	case AuthenticationFailed, PermissionDenied, PreflightFailed:
		return true
	}
	return false
}
