package plugin

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Words for the wait the operator recorded in status.waiting. The
// operator's engine decides what a set waits for and until when; the
// plugin only says it, so it never disagrees with the manager's own
// --default-grace-period or clock.

// waitStep is the wait as a next step, short enough for the table:
// "reset in 4m12s: gracePeriod after the rollback's rollout". ok is false
// when status records no wait (a manager that predates status.waiting).
func waitStep(cs *v1.CredentialSet, now time.Time) (string, bool) {
	w := cs.Status.Waiting
	if w == nil {
		return "", false
	}
	switch w.For {
	case v1.WaitRollout:
		return fmt.Sprintf("wait for consumers to roll out (%s)", consumerCount(cs)) + ackHint(cs), true
	case v1.WaitAcknowledgement:
		return fmt.Sprintf("wait for consumers to roll out (%s)", consumerCount(cs)) + ackHint(cs), true
	case v1.WaitRollback:
		return fmt.Sprintf("wait: consumers roll back (%s); then gracePeriod, then the %s reset", consumerCount(cs), backendName(cs)), true
	case v1.WaitResetGracePeriod:
		return "wait: " + countdown("reset", w, now) + ": gracePeriod after the rollback's rollout", true
	case v1.WaitGracePeriod:
		return "wait: " + countdown("discard", w, now) + ": gracePeriod after the rollout", true
	case v1.WaitMaintenanceWindow:
		return "wait: " + countdown("the scheduled rotation starts", w, now) + ": its maintenance window opens", true
	}
	return "", false
}

// countdown is "reset in 4m12s", or "reset due now" once the deadline
// passed (the operator acts on its next look, within seconds).
func countdown(what string, w *v1.WaitStatus, now time.Time) string {
	if w.Until == nil {
		return what + " later"
	}
	left := w.Until.Sub(now)
	if left <= 0 {
		return what + " due now"
	}
	return what + " in " + left.Round(time.Second).String()
}

// waitDetail is the wait in full, for status -v and --wait: what ends it
// and the deadline as a time of day.
func waitDetail(cs *v1.CredentialSet, now time.Time) string {
	w := cs.Status.Waiting
	if w == nil {
		return ""
	}
	until := "no deadline: "
	if w.Until != nil {
		until = "until " + w.Until.UTC().Format("2006-01-02 15:04:05 MST")
		if left := w.Until.Sub(now); left > 0 {
			until += " (in " + duration.HumanDuration(left) + ")"
		} else {
			until += " (passed: the operator acts on its next look)"
		}
		until += ": "
	}
	switch w.For {
	case v1.WaitRollout:
		return until + "the consumers roll out the new credentials (" + consumerCount(cs) + "); the discard waits for them"
	case v1.WaitAcknowledgement:
		return until + "consumer group members to be acknowledged (kubectl rekey ack " + cs.Name + " --group GROUP --members A,B)"
	case v1.WaitRollback:
		return until + "the consumers roll back onto the current credentials (" + consumerCount(cs) + "); then " + graceText(cs) + ", then the reset"
	case v1.WaitResetGracePeriod:
		return until + recordedGrace(cs) + " after the rollback's rollout, for consumers rekey cannot watch; then " + backendName(cs) + " is reset to the current " + secretWord(cs)
	case v1.WaitGracePeriod:
		return until + recordedGrace(cs) + " after the rollout (discardPolicy AfterRollout); then the old credentials are discarded"
	case v1.WaitMaintenanceWindow:
		return until + "the scheduled rotation is due and starts when a maintenance window opens"
	}
	return until + string(w.For)
}

// recordedGrace is the grace period the operator applies, as status shows
// it (the deadline less the rollout's end), else as the spec and the
// manager's documented default say.
func recordedGrace(cs *v1.CredentialSet) string {
	w, at := cs.Status.Waiting, cs.Status.RolledOutAt
	if w == nil || w.Until == nil || at == nil || w.Until.Before(at) {
		return graceText(cs)
	}
	return "gracePeriod (" + w.Until.Sub(at.Time).Round(time.Second).String() + ")"
}
