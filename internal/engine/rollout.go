package engine

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
)

// RolloutState is the rollout gate's view of one consumer.
type RolloutState struct {
	Done    bool
	Message string // what it waits for, when not done
}

func ptrOr(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}

// StatefulSetRollout is seed 000's rollout gate: the controller observed the
// latest spec, every pod is on the update revision, updated and ready.
func StatefulSetRollout(s *appsv1.StatefulSet) RolloutState {
	want := ptrOr(s.Spec.Replicas, 1)
	st := s.Status
	switch {
	case st.ObservedGeneration < s.Generation:
		return RolloutState{Message: "StatefulSet controller has not observed the latest spec"}
	case st.CurrentRevision != st.UpdateRevision:
		return RolloutState{Message: fmt.Sprintf("pods are moving to revision %s (%d/%d updated)", st.UpdateRevision, st.UpdatedReplicas, want)}
	case st.UpdatedReplicas != want:
		return RolloutState{Message: fmt.Sprintf("%d/%d pods updated", st.UpdatedReplicas, want)}
	case st.ReadyReplicas != want:
		return RolloutState{Message: fmt.Sprintf("%d/%d pods ready", st.ReadyReplicas, want)}
	}
	return RolloutState{Done: true}
}

// DeploymentRollout is done when every replica runs the latest template and
// is available, and no old replica remains.
func DeploymentRollout(d *appsv1.Deployment) RolloutState {
	want := ptrOr(d.Spec.Replicas, 1)
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return RolloutState{Message: "Deployment controller has not observed the latest spec"}
	case st.UpdatedReplicas != want:
		return RolloutState{Message: fmt.Sprintf("%d/%d replicas updated", st.UpdatedReplicas, want)}
	case st.Replicas != want:
		return RolloutState{Message: fmt.Sprintf("%d old replicas still running", st.Replicas-st.UpdatedReplicas)}
	case st.AvailableReplicas != want:
		return RolloutState{Message: fmt.Sprintf("%d/%d replicas available", st.AvailableReplicas, want)}
	}
	return RolloutState{Done: true}
}

// DaemonSetRollout is done when every scheduled pod is updated and ready.
func DaemonSetRollout(d *appsv1.DaemonSet) RolloutState {
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return RolloutState{Message: "DaemonSet controller has not observed the latest spec"}
	case st.UpdatedNumberScheduled != st.DesiredNumberScheduled:
		return RolloutState{Message: fmt.Sprintf("%d/%d pods updated", st.UpdatedNumberScheduled, st.DesiredNumberScheduled)}
	case st.NumberReady != st.DesiredNumberScheduled:
		return RolloutState{Message: fmt.Sprintf("%d/%d pods ready", st.NumberReady, st.DesiredNumberScheduled)}
	}
	return RolloutState{Done: true}
}
