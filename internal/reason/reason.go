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
)

// Condition types.
const (
	CondReady           = "Ready"
	CondRotating        = "Rotating"
	CondRolloutComplete = "RolloutComplete"
	CondDegraded        = "Degraded"
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
)
