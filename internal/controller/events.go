package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// maxEventNote bounds every Event's note, in bytes. The API server refuses
// an Event whose note exceeds 1,024 bytes, and the recorder does not retry
// it: the Warning would never exist. The margin leaves room for a note the
// recorder or the server decorates.
const maxEventNote = 900

// elision replaces the middle of a text too long for where it goes.
const elision = " … (cut short; the set's conditions and kubectl rekey status -v give the whole text) … "

// EventNote is the note an Event gets for msg: msg itself when it fits in
// maxEventNote bytes, else its start and its end (which names the next
// step) around a marker that says where the rest is. Lists that can be
// long are summarised before (summarize); this is the bound that holds
// whatever a message holds.
func EventNote(msg string) string { return elide(msg, maxEventNote) }

// elide bounds s to n bytes (n well above len(elision)), keeping its start
// and its end, in valid UTF-8.
func elide(s string, n int) string {
	if len(s) <= n {
		return s
	}
	keep := n - len(elision)
	head, tail := keep*3/5, keep*2/5
	return strings.ToValidUTF8(s[:head], "") + elision + strings.ToValidUTF8(s[len(s)-tail:], "")
}

// summarize names a list that can be long in a bounded way: all of it
// when short, else how many, the first few, and where the rest is. It is
// the registry's, so that the backends' messages and the controller's
// bound a list alike.
var summarize = registry.Summarize

func (r *Reconciler) event(cs *v1.CredentialSet, typ string, why reason.Reason, action, msg string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(cs, nil, typ, string(why), action, "%s", EventNote(fmt.Sprintf(msg, args...)))
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
	r.Recorder.Eventf(cs, related, typ, string(why), action, "%s", EventNote(fmt.Sprintf(msg, args...)))
}

// stepEvent is rotationEvent for the Normal Event a step ends with: its note
// ends with the step the set is in now, as status.step says, so the Events
// of a set read as its way through the step table.
func (r *Reconciler) stepEvent(cs *v1.CredentialSet, id string, why reason.Reason, action, msg string, args ...any) {
	r.rotationEvent(cs, id, "Normal", why, action, msg+" (step %s)", append(args, engine.StepOf(cs.Status))...)
}

// noteWaiting emits WaitingForRollout once per rotation (not on every
// 15 s requeue): the first time the discard waits for the consumers. st
// is the set's status as this reconcile knows it.
func (r *Reconciler) noteWaiting(cs *v1.CredentialSet, st v1.CredentialSetStatus, d engine.Decision) {
	id := st.RotationID
	recovery, resetID := engine.ResetOf(st)
	if st.ResetPending {
		// The rollback's own ID: lastRotationID is the rotation completed
		// before it, which the Event named by mistake.
		id = "reset:" + resetID
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
		what = summarize(waiting, "consumers", "status.consumers")
	}
	if st.ResetPending {
		of := "rollback of rotation " + resetID
		if recovery {
			of = "recovery " + resetID
		}
		r.stepEvent(cs, id, reason.WaitingForRollout, "Reset", "%s: waiting for %s to roll out the current credentials again; every instance is reset gracePeriod (%s) after they did", of, what, r.gracePeriod(cs))
		return
	}
	r.stepEvent(cs, id, reason.WaitingForRollout, "Discard", "rotation %s: waiting for %s to roll out the new credentials before the old ones are discarded (checked every %s; status.consumers says what each waits for)", id, what, d.Requeue)
}
