package engine

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Waiting names the wait decision d holds the set in, with its deadline
// when time alone ends it, so that status (and through it kubectl rekey)
// says what the operator waits for and until when instead of each reader
// re-deriving the rule. The deadline is the one Decide computed its
// requeue from. nil: the set does not wait (it acts, is refused, or has
// nothing to do). A Distributed rotation that no discard will end yet
// (discardPolicy Manual) still waits for its consumers' rollout: the
// discard a person makes then would pass the same gate.
func Waiting(in Input, d Decision) *v1.WaitStatus {
	st := in.Status
	switch {
	case d.Action == Wait && st.ResetPending && !d.Until.IsZero():
		return &v1.WaitStatus{For: v1.WaitResetGracePeriod, Until: deadline(d.Until)}
	case d.Action == Wait && st.ResetPending:
		return &v1.WaitStatus{For: v1.WaitRollback}
	case d.Action == Wait && !d.Until.IsZero():
		return &v1.WaitStatus{For: v1.WaitGracePeriod, Until: deadline(d.Until)}
	case d.Action == Wait && st.Phase == v1.PhaseDistributed,
		d.Action == None && st.Phase == v1.PhaseDistributed && !in.RolloutDone && !st.DiscardStarted:
		return rolloutWait(st)
	}
	return nil
}

// WindowWaiting is the wait of a scheduled rotation that is due and held
// by closed maintenance windows until due.NextAt; nil otherwise.
func WindowWaiting(due PolicyDue) *v1.WaitStatus {
	if !due.WindowHeld || due.NextAt == nil {
		return nil
	}
	return &v1.WaitStatus{For: v1.WaitMaintenanceWindow, Until: deadline(*due.NextAt)}
}

// rolloutWait is a rollout's wait: Acknowledgement when only consumer
// groups hold it (only a person or their automation moves them on).
func rolloutWait(st v1.CredentialSetStatus) *v1.WaitStatus {
	groups, others := 0, 0
	for _, c := range st.Consumers {
		switch {
		case c.RolledOut:
		case c.Kind == v1.KindGroup:
			groups++
		default:
			others++
		}
	}
	if groups > 0 && others == 0 {
		return &v1.WaitStatus{For: v1.WaitAcknowledgement}
	}
	return &v1.WaitStatus{For: v1.WaitRollout}
}

// deadline is t as status stores it: whole seconds, rounded up so that a
// reader is never told a wait ends before it does (and a status rewritten
// with the same deadline compares equal to what the API server returns).
func deadline(t time.Time) *metav1.Time {
	m := metav1.NewTime(t.Add(time.Second - 1).Truncate(time.Second))
	return &m
}

// ResetOf names what a pending reset finishes: a recover request on an
// idle set (recovery, its ID), or the rollback of a rotation (its ID,
// status.lastRolledBackID). A recovery restarts the consumers under its
// own restart value, which tells the two apart; lastRotationID is the
// rotation completed before, never the one rolled back.
func ResetOf(st v1.CredentialSetStatus) (recovery bool, id string) {
	if st.LastRecoverID != "" && RestartFor(st.RestartID, RecoverRestartID(st.LastRecoverID, "")) && !RestartFor(st.RestartID, RollbackRestartID(st.LastRolledBackID, "")) {
		return true, st.LastRecoverID
	}
	return false, st.LastRolledBackID
}
