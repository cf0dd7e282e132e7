package engine

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// RolloutState is the rollout gate's view of one consumer.
type RolloutState struct {
	Done bool
	// Stuck: the rollout will not finish by itself (a progress deadline
	// passed, the workload is paused, or its update strategy leaves pods
	// on the old template); Message says what a person must do.
	Stuck   bool
	Message string // what it waits for, when not done
}

// The gate follows `kubectl rollout status` (k8s.io/kubectl
// polymorphichelpers; rollout_test.go checks the two agree case by case)
// with one difference: kubectl reports a partitioned or OnDelete rollout
// as finished, while rekey needs every pod restarted, since a pod left on
// the old template still holds the old credentials. Those cases are Stuck
// instead, with the step that finishes them. The rules are written out
// here rather than imported: the kubectl package would add 35 MB of
// dependencies to the manager for three functions.

// progressDeadlineExceeded is the Progressing condition's reason once a
// Deployment's progressDeadlineSeconds passed without progress.
const progressDeadlineExceeded = "ProgressDeadlineExceeded"

func ptrOr(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}

// StatefulSetRollout: the controller observed the latest spec, every pod
// is ready and on the update revision.
func StatefulSetRollout(s *appsv1.StatefulSet) RolloutState {
	want := ptrOr(s.Spec.Replicas, 1)
	st := s.Status
	if st.ObservedGeneration == 0 || st.ObservedGeneration < s.Generation {
		return RolloutState{Message: "StatefulSet controller has not observed the latest spec"}
	}
	onOld := st.CurrentRevision != st.UpdateRevision || st.UpdatedReplicas != want
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType && onOld {
		return RolloutState{Stuck: true, Message: fmt.Sprintf(
			"updateStrategy OnDelete: %d/%d pods run the restarted template, and the others restart only when deleted; delete them (kubectl delete pod) to finish the rollout", st.UpdatedReplicas, want)}
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ptrOr(ru.Partition, 0) > 0 && onOld {
		return RolloutState{Stuck: true, Message: fmt.Sprintf(
			"rollingUpdate.partition %d keeps pods below ordinal %d on the old template, with the old credentials; lower the partition to 0 to finish the rollout", *ru.Partition, *ru.Partition)}
	}
	switch {
	case st.ReadyReplicas < want:
		return RolloutState{Message: fmt.Sprintf("%d/%d pods ready", st.ReadyReplicas, want)}
	case st.CurrentRevision != st.UpdateRevision:
		return RolloutState{Message: fmt.Sprintf("pods are moving to revision %s (%d/%d updated)", st.UpdateRevision, st.UpdatedReplicas, want)}
	case st.UpdatedReplicas != want:
		return RolloutState{Message: fmt.Sprintf("%d/%d pods updated", st.UpdatedReplicas, want)}
	}
	return RolloutState{Done: true}
}

// DeploymentRollout is done when every replica runs the latest template
// and is available, and no old replica remains.
func DeploymentRollout(d *appsv1.Deployment) RolloutState {
	want := ptrOr(d.Spec.Replicas, 1)
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		if d.Spec.Paused {
			return RolloutState{Stuck: true, Message: fmt.Sprintf(
				"the Deployment is paused, so its pods keep the old credentials; resume it (kubectl rollout resume deployment/%s)", d.Name)}
		}
		return RolloutState{Message: "Deployment controller has not observed the latest spec"}
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == progressDeadlineExceeded {
			return RolloutState{Stuck: true, Message: fmt.Sprintf(
				"the rollout exceeded its progress deadline (%s); fix what keeps the new pods from becoming available (kubectl describe deployment/%s), and it resumes", c.Message, d.Name)}
		}
	}
	if d.Spec.Paused && (st.UpdatedReplicas < want || st.Replicas > st.UpdatedReplicas) {
		return RolloutState{Stuck: true, Message: fmt.Sprintf(
			"the Deployment is paused, so its pods keep the old credentials; resume it (kubectl rollout resume deployment/%s)", d.Name)}
	}
	switch {
	case st.UpdatedReplicas < want:
		return RolloutState{Message: fmt.Sprintf("%d/%d replicas updated", st.UpdatedReplicas, want)}
	case st.Replicas > st.UpdatedReplicas:
		return RolloutState{Message: fmt.Sprintf("%d old replicas still running", st.Replicas-st.UpdatedReplicas)}
	case st.AvailableReplicas < st.UpdatedReplicas:
		return RolloutState{Message: fmt.Sprintf("%d/%d updated replicas available", st.AvailableReplicas, st.UpdatedReplicas)}
	case st.TerminatingReplicas != nil && *st.TerminatingReplicas > 0:
		// kubectl is done here, but a terminating pod still runs, with
		// the old credentials, for its whole grace period.
		return RolloutState{Message: fmt.Sprintf("%d old pods still terminating", *st.TerminatingReplicas)}
	}
	return RolloutState{Done: true}
}

// DaemonSetRollout is done when every scheduled pod is updated and
// available.
func DaemonSetRollout(d *appsv1.DaemonSet) RolloutState {
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		return RolloutState{Message: "DaemonSet controller has not observed the latest spec"}
	}
	if d.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType && st.UpdatedNumberScheduled < st.DesiredNumberScheduled {
		return RolloutState{Stuck: true, Message: fmt.Sprintf(
			"updateStrategy OnDelete: %d/%d pods run the restarted template, and the others restart only when deleted; delete them (kubectl delete pod) to finish the rollout", st.UpdatedNumberScheduled, st.DesiredNumberScheduled)}
	}
	switch {
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
		return RolloutState{Message: fmt.Sprintf("%d/%d pods updated", st.UpdatedNumberScheduled, st.DesiredNumberScheduled)}
	case st.NumberAvailable < st.DesiredNumberScheduled:
		return RolloutState{Message: fmt.Sprintf("%d/%d pods available", st.NumberAvailable, st.DesiredNumberScheduled)}
	}
	return RolloutState{Done: true}
}

// RotationStuck says whether the active rotation has stayed active
// (Rotating or Distributed) for after or longer, for how long, and
// otherwise how long until it would count as stuck (0 when no rotation is
// active or its start is unknown).
func RotationStuck(st v1.CredentialSetStatus, now time.Time, after time.Duration) (stuck bool, active, left time.Duration) {
	if st.Phase != v1.PhaseRotating && st.Phase != v1.PhaseDistributed || st.RotationStartedAt == nil || after <= 0 {
		return false, 0, 0
	}
	active = now.Sub(st.RotationStartedAt.Time)
	if active >= after {
		return true, active, 0
	}
	return false, active, after - active
}

// RestartValue is the pod-template restart annotation value for consumers:
// status.restartID, which each transition that changes what consumers are
// given sets (<rotation>-<source Secret version> once Distributed,
// rollback-<rotation>-<version> after a rollback) and which stays stable
// across Distributed → Idle. Status written before restartID existed: the
// active rotation once Distributed, else the last completed one.
func RestartValue(st v1.CredentialSetStatus) string {
	if st.RestartID != "" {
		return st.RestartID
	}
	if st.Phase == v1.PhaseDistributed {
		return st.RotationID
	}
	return st.LastRotationID
}

// DistributedRestartID is the restart value once rotation id's new
// secrets are distributed, from the source Secret at version rv (holding
// them). Each distribution gets a value of its own, also when the ID was
// used before (a status restored from a backup no longer records it) or
// the rotation's secrets were read back and distributed again
// (ReadBackRotation): a pod template set back to a value its pods already
// run restarts nobody, and pods that ran the earlier distribution would
// keep what it gave them.
func DistributedRestartID(id, rv string) string { return versioned(id, rv) }

// RollbackRestartID is the restart value after rotation id is rolled
// back, from the source Secret at version rv: new, so every consumer
// restarts onto the current secrets, even when no rotation ever completed
// (no earlier value to return to), and when the ID was rolled back before.
func RollbackRestartID(id, rv string) string { return versioned("rollback-"+id, rv) }

// RecoverRestartID is the restart value after recover request id on an
// idle set, from the source Secret at version rv: new, so every consumer
// restarts onto the current secrets before the reset makes the backend
// forget whatever else they may hold (a status and source Secret restored
// from a backup taken before a rotation its consumers already run).
func RecoverRestartID(id, rv string) string { return versioned("recover-"+id, rv) }

// versioned is restart value v of the source Secret at version rv: the API
// server gives every write a version of its own, restores included.
func versioned(v, rv string) string {
	if rv == "" {
		return v
	}
	return v + "-" + rv
}

// RestartFor says whether restart value v is one that base (a transition's
// value before the source Secret's version is added) makes.
func RestartFor(v, base string) bool {
	return v == base || len(v) > len(base)+1 && strings.HasPrefix(v, base+"-")
}

// AdoptRestartID is the restart value after the keys a person deleted from
// the source Secret were read back from the backend (AddReadBack), which
// held source Secret version rv then: new, so every consumer restarts onto
// the keys the backend holds.
func AdoptRestartID(rv string) string { return "adopted-" + rv }

// LeftoverRecoverID names the recovery a reconcile of an idle set starts
// by itself when its source Secret holds pending secrets that no rotation
// accounts for, at the set's metadata.generation gen (each spec edit
// bumps it, so a later one restarts the consumers again).
func LeftoverRecoverID(gen int64) string { return fmt.Sprintf("leftover-g%d", gen) }
