package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// WaitFor names what a set waits for before its next step.
// +kubebuilder:validation:Enum=Rollout;Acknowledgement;GracePeriod;Rollback;ResetGracePeriod;MaintenanceWindow
type WaitFor string

const (
	// WaitRollout: the consumers roll out the new credentials; the
	// discard (by a person, a discardGeneration or AfterRollout) waits.
	WaitRollout WaitFor = "Rollout"
	// WaitAcknowledgement: only consumer group members nobody has
	// acknowledged (kubectl rekey ack) hold the rollout.
	WaitAcknowledgement WaitFor = "Acknowledgement"
	// WaitGracePeriod: every consumer rolled out; discardPolicy
	// AfterRollout discards once gracePeriod passed.
	WaitGracePeriod WaitFor = "GracePeriod"
	// WaitRollback: after an abort or recover, the consumers roll back
	// onto the current credentials before the backend is reset.
	WaitRollback WaitFor = "Rollback"
	// WaitResetGracePeriod: the consumers rolled back; the backend is
	// reset once gracePeriod passed.
	WaitResetGracePeriod WaitFor = "ResetGracePeriod"
	// WaitMaintenanceWindow: the scheduled rotation is due and starts when
	// a maintenance window opens.
	WaitMaintenanceWindow WaitFor = "MaintenanceWindow"
)

// WaitStatus is what the operator waits for, as it decided at its last
// reconcile. It names no secret and nothing outside the set: a step and,
// when time alone ends it, a time.
type WaitStatus struct {
	// For names the wait.
	For WaitFor `json:"for"`
	// Until is when the wait ends by itself (a grace period's end, a
	// window's opening); absent when something else ends it (a rollout, an
	// acknowledgement).
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
}
