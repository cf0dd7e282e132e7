package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RotationPhase is where a CredentialSet is in its rotation cycle.
// +kubebuilder:validation:Enum=Pending;Idle;Rotating;Distributed
type RotationPhase string

const (
	// PhasePending: the set has no credentials yet (generation 1 is not
	// provisioned, or cannot be: its conditions say why). It is never
	// Idle before it has something to serve.
	PhasePending     RotationPhase = "Pending"
	PhaseIdle        RotationPhase = "Idle"
	PhaseRotating    RotationPhase = "Rotating"
	PhaseDistributed RotationPhase = "Distributed"
)

// RotationStep names, within the phase, what the rotation is doing or
// waiting for: one value for each state a maintainer and an on-call
// engineer must tell apart. rekey derives it from the rest of the status
// on every status write; the engine's step table documents each.
// +kubebuilder:validation:Enum=Provisioning;Idle;Applying;Distributing;AwaitingRollout;AwaitingDiscard;Discarding;Confirming;RollingBack;Resetting
type RotationStep string

// CredentialSetStatus is the truth about a rotation; annotations only
// trigger. Phase and rotationID are always present so every transition can be
// a compare-and-set on them.
type CredentialSetStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase RotationPhase `json:"phase"`
	// Step is what the set is doing or waiting for within its phase.
	// +optional
	Step RotationStep `json:"step,omitempty"`
	// RotationID is the active rotation, empty when Idle.
	// +optional
	RotationID string `json:"rotationID"`
	// RotationKeys are the source Secret keys the active rotation (or the
	// reset a rollback owes) covers, recorded when it started. A key the
	// spec lists since is left out of it and keeps its current secret; a
	// key recorded here whose new secret is gone from the source Secret
	// still stops the rotation. Empty when no rotation is in flight.
	// +optional
	RotationKeys []string `json:"rotationKeys,omitempty"`
	// RotateApplied: every instance accepts the pending credentials.
	// +optional
	RotateApplied bool `json:"rotateApplied,omitempty"`
	// DiscardApplied: every instance has dropped the old credentials.
	// +optional
	DiscardApplied bool `json:"discardApplied,omitempty"`
	// DiscardStarted: dropping the old credentials began, so some instances
	// may refuse them already; from here the rotation can only complete.
	// +optional
	DiscardStarted bool `json:"discardStarted,omitempty"`
	// RestartID is the value rekey puts in each consumer's restart
	// annotation: the rotation whose credentials the consumers must run,
	// or rollback-<rotation> after a rotation was rolled back. It changes
	// only when what consumers are given changes.
	// +optional
	RestartID string `json:"restartID,omitempty"`
	// ResetPending: a rotation was rolled back (abort or recover); once the
	// consumers run the current secrets again, the backend is reset to
	// accept only those.
	// +optional
	ResetPending bool `json:"resetPending,omitempty"`
	// LastRolledBackID is the most recent rotation rolled back; a rotate
	// request carrying it is stale, as one carrying lastRotationID is.
	// +optional
	LastRolledBackID string `json:"lastRolledBackID,omitempty"`
	// LastRecoverID is the most recent recover request served.
	// +optional
	LastRecoverID string `json:"lastRecoverID,omitempty"`
	// LastRotationID is the most recently completed rotation; a trigger
	// carrying it is stale.
	// +optional
	LastRotationID string `json:"lastRotationID,omitempty"`
	// KeyGeneration counts credential generations: 1 once provisioned, +1
	// per completed rotation (or the spec's keyGeneration that asked for
	// it); 0 until provisioned.
	// +optional
	KeyGeneration int64 `json:"keyGeneration"`
	// KeyVersion is the backend version that minted the current
	// credentials; empty when unknown (adopted credentials).
	// +optional
	KeyVersion string `json:"keyVersion"`
	// TargetGeneration is the generation the active rotation produces.
	// +optional
	TargetGeneration int64 `json:"targetGeneration,omitempty"`
	// TargetKeyVersion is the backend version the active rotation mints with.
	// +optional
	TargetKeyVersion string `json:"targetKeyVersion,omitempty"`
	// PriorKeyCount is how many prior generations' identities still exist
	// in the backend (overlapping rotation only), read from the backend.
	// +optional
	PriorKeyCount *int32 `json:"priorKeyCount,omitempty"`
	// NextRotationAt is when policy Schedule starts the next rotation.
	// +optional
	NextRotationAt *metav1.Time `json:"nextRotationAt,omitempty"`
	// Waiting is what the operator waits for before the set's next step
	// (a rollout, a grace period, a maintenance window), and until when
	// if time alone ends it; absent when it waits for nothing.
	// +optional
	Waiting *WaitStatus `json:"waiting,omitempty"`
	// SecretHash names what the distribution Secrets hold now (derived from
	// the generation and rotation, never from secret material). A consumer
	// counts as moved only for this hash; a change resets coverage.
	// +optional
	SecretHash string `json:"secretHash,omitempty"`
	// RetirementWaitsFor lists, while a RabbitMQ retirement is pending, this
	// set's consumers that have not moved: the old user is deleted once
	// none is left.
	// +optional
	RetirementWaitsFor []string `json:"retirementWaitsFor,omitempty"`
	// UnusedKeysRemoved lists the unused bootstrap keys rekey deleted
	// (spec.ceph.removeUnusedKeys).
	// +optional
	UnusedKeysRemoved []string `json:"unusedKeysRemoved,omitempty"`
	// Cluster identifies the backend cluster (RabbitMQ: its name), so that
	// two sets reaching one cluster through different endpoints are told
	// apart from two clusters.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// CurrentSince is when the current credentials became current.
	// +optional
	CurrentSince *metav1.Time `json:"currentSince,omitempty"`
	// RotationStartedAt is when the active rotation started.
	// +optional
	RotationStartedAt *metav1.Time `json:"rotationStartedAt,omitempty"`
	// DistributedAt is when the active rotation's credentials were
	// distributed.
	// +optional
	DistributedAt *metav1.Time `json:"distributedAt,omitempty"`
	// RolledOutAt is when every consumer had rolled out the active
	// rotation (or, during a rollback, the current secrets again); the
	// grace period before discard or reset counts from here.
	// +optional
	RolledOutAt *metav1.Time `json:"rolledOutAt,omitempty"`
	// Consumers is, per consumer, whether it runs the newest credentials.
	// +optional
	Consumers []ConsumerStatus `json:"consumers,omitempty"`
	// Check answers the last check request (annotation rekey.io/check,
	// written by kubectl rekey check): what rekey verified, per instance
	// and consumer, with the set's own credentials.
	// +optional
	Check *CheckResult `json:"check,omitempty"`
	// ConsumersUpdated is "n/m" consumers on the newest credentials.
	// +optional
	ConsumersUpdated string `json:"consumersUpdated,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConsumerStatus is what rekey last saw of one consumer's rollout.
type ConsumerStatus struct {
	// Kind is a workload kind, or Group for a consumer group.
	Kind      ConsumerKind `json:"kind"`
	Namespace string       `json:"namespace,omitempty"`
	Name      string       `json:"name"`
	// RolledOut: the consumer has moved to the credentials of secretHash:
	// its rollout completed after they were distributed, or every member
	// of the group was acknowledged for them.
	RolledOut bool `json:"rolledOut"`
	// SecretHash is the distribution this entry counts for.
	// +optional
	SecretHash string `json:"secretHash,omitempty"`
	// MovedAt is when the consumer was first seen moved for secretHash.
	// +optional
	MovedAt *metav1.Time `json:"movedAt,omitempty"`
	// MembersUpdated lists a group's members acknowledged for secretHash.
	// +optional
	MembersUpdated []string `json:"membersUpdated,omitempty"`
	// Coverage is "n/m" members updated (groups only).
	// +optional
	Coverage string `json:"coverage,omitempty"`
	// Message says what the rollout waits for.
	// +optional
	Message string `json:"message,omitempty"`
	// Stuck: the rollout will not finish by itself (a progress deadline
	// passed, the workload is paused, or its update strategy leaves pods
	// on the old template); Message says what to do.
	// +optional
	Stuck bool `json:"stuck,omitempty"`
}

// CheckResult is what one check found. It never holds a secret.
type CheckResult struct {
	// ID is the rekey.io/check request this answers.
	// +kubebuilder:validation:MaxLength=128
	ID string `json:"id"`
	// CheckedAt is when the checks ran.
	CheckedAt metav1.Time `json:"checkedAt"`
	// Passed: no finding failed.
	Passed bool `json:"passed"`
	// Findings are what each check found, failed ones first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Findings []CheckFinding `json:"findings,omitempty"`
	// Omitted counts the findings left out beyond the 64 kept (passed
	// ones first).
	// +optional
	Omitted int32 `json:"omitted,omitempty"`
}

// CheckFinding is one check of one target.
type CheckFinding struct {
	// Target is what was checked: an instance (host:port), a consumer
	// (Deployment ns/name), or the set itself.
	// +kubebuilder:validation:MaxLength=256
	Target string `json:"target"`
	// Check names the check (reachable, tls, version, privileges, user
	// NAME, consumer).
	// +kubebuilder:validation:MaxLength=128
	Check string `json:"check"`
	// OK: the check passed.
	OK bool `json:"ok"`
	// Message says what was found.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// Fix says what to do when the check failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Fix string `json:"fix,omitempty"`
}
