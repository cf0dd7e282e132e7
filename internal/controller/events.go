package controller

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

func (r *Reconciler) event(cs *v1.CredentialSet, typ string, why reason.Reason, action, msg string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(cs, nil, typ, string(why), action, msg, args...)
	}
}

// rotationEvent emits an Event that belongs to rotation id (its note names
// the id). The events.k8s.io recorder folds Events it deems the same —
// same type, reason, action, regarding and related object — into one
// series that keeps the first note; the related reference names the
// rotation, so the Events of one rotation are never folded into another's
// (RotationStarted, PolicyTriggered of the next rotation stay visible).
func (r *Reconciler) rotationEvent(cs *v1.CredentialSet, id, typ string, why reason.Reason, action, msg string, args ...any) {
	if r.Recorder == nil {
		return
	}
	related := &corev1.ObjectReference{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet",
		Namespace: cs.Namespace, Name: cs.Name, UID: cs.UID, FieldPath: "rotation:" + id}
	r.Recorder.Eventf(cs, related, typ, string(why), action, msg, args...)
}

// noteWaiting emits WaitingForRollout once per rotation (not on every
// 15 s requeue): the first time the discard waits for the consumers. st
// is the set's status as this reconcile knows it.
func (r *Reconciler) noteWaiting(cs *v1.CredentialSet, st v1.CredentialSetStatus, d engine.Decision) {
	id := st.RotationID
	if st.ResetPending {
		id = "reset:" + st.LastRotationID
	}
	if prev, ok := r.waitNoted.Swap(cs.UID, id); ok && prev == id {
		return
	}
	var waiting []string
	for _, c := range st.Consumers {
		if !c.RolledOut {
			waiting = append(waiting, strings.TrimPrefix(string(c.Kind)+" "+strings.TrimPrefix(c.Namespace+"/"+c.Name, "/"), " "))
		}
	}
	what := "every consumer"
	if len(waiting) > 0 {
		what = strings.Join(waiting, ", ")
	}
	if st.ResetPending {
		r.rotationEvent(cs, id, "Normal", reason.WaitingForRollout, "Reset", "rollback of rotation %s: waiting for %s to roll out the current credentials again before every instance is reset", st.LastRotationID, what)
		return
	}
	r.rotationEvent(cs, id, "Normal", reason.WaitingForRollout, "Discard", "rotation %s: waiting for %s to roll out the new credentials before the old ones are discarded (checked every %s; status.consumers says what each waits for)", id, what, d.Requeue)
}
