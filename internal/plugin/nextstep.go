package plugin

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// NextStep says in words what happens next for a set, from its spec and
// status alone, so that it never disagrees with what the operator recorded.
func NextStep(cs *v1.CredentialSet) string { return nextStep(cs, time.Now()) }

// nextStep is NextStep at a given time: a schedule says how far off the
// next rotation is.
func nextStep(cs *v1.CredentialSet, now time.Time) string {
	if cs.DeletionTimestamp.IsZero() {
		return liveStep(cs, now)
	}
	policy := cs.Spec.OnDeletion()
	if engine.RotationInFlight(cs.Status) {
		return fmt.Sprintf("being deleted (deletionPolicy %s); rotation %s finishes first: %s; or kubectl rekey abort %s, or set deletionPolicy Retain to let go as it is",
			policy, cs.Status.RotationID, liveStep(cs, now), cs.Name)
	}
	if c := meta.FindStatusCondition(cs.Status.Conditions, reason.CondDegraded); c != nil && c.Status == "True" {
		// The operator holds the wind-down on a backend's own refusal
		// (a second password the status does not account for).
		if rp, ok := registry.RepairOf(cs, reason.Reason(c.Reason)); ok && rp.Held != "" {
			return fmt.Sprintf("being deleted (deletionPolicy %s), held: %s; kubectl rekey recover %s, or set deletionPolicy Retain to let go %s", policy, rp.Held, cs.Name, rp.LetGo)
		}
	}
	if policy == v1.DeletionDelete && len(cs.Spec.Consumers)+len(cs.Spec.ConsumerGroups) > 0 {
		return "being deleted (deletionPolicy Delete): its identities go once every declared consumer is gone or removed from the spec (the UsersInUse Event names those left)"
	}
	return fmt.Sprintf("being deleted (deletionPolicy %s): wait, the operator winds it down", policy)
}

// liveStep is the next step of a set not being deleted.
func liveStep(cs *v1.CredentialSet, now time.Time) string {
	st := cs.Status
	if c := meta.FindStatusCondition(st.Conditions, reason.CondDegraded); c != nil && c.Status == "True" {
		return c.Message
	}
	if st.ResetPending {
		if step, ok := waitStep(cs, now); ok {
			return step
		}
		return resetStep(cs, now)
	}
	switch st.Phase {
	case v1.PhasePending:
		return "wait: the operator provisions the credentials"
	case v1.PhaseIdle:
		if st.KeyGeneration == 0 {
			return "wait: the operator provisions the credentials"
		}
		return idleStep(cs, now)
	case v1.PhaseRotating:
		return termsFor(cs).Rotating
	case v1.PhaseDistributed:
		if st.DiscardApplied {
			return termsFor(cs).Retiring
		}
		if !rolledOut(cs) {
			return fmt.Sprintf("wait for consumers to roll out (%s)", consumerCount(cs)) + ackHint(cs)
		}
		if w := st.Waiting; w != nil && w.For == v1.WaitGracePeriod {
			step, _ := waitStep(cs, now)
			return step
		}
		declared := engine.DiscardRequested("", cs.Spec.Rotation, st) != ""
		switch d := discardDecision(cs, now); {
		case declared && (d.Action == engine.Discard || d.Action == engine.Wait):
			return fmt.Sprintf("wait: spec.rotation.discardGeneration %d asks for the discard; the operator retires the old credentials", *cs.Spec.Rotation.DiscardGeneration)
		case d.Action == engine.Refuse && d.Reason == reason.AutoDiscardHeld:
			return "verify, then kubectl rekey discard " + cs.Name + discardGenerationHint(cs) + " (discardPolicy AfterRollout, but no consumer is declared, so the operator does not discard by itself)"
		case d.Action == engine.Discard || d.Action == engine.Wait:
			return termsFor(cs).AutoDiscard
		}
		return "verify, then kubectl rekey discard " + cs.Name + discardGenerationHint(cs) + termsFor(cs).DiscardNote
	default:
		return "wait: the operator has not picked this set up yet"
	}
}

// discardGenerationHint offers the declarative discard to a set that uses
// it: the generation to set is the one the active rotation produces.
func discardGenerationHint(cs *v1.CredentialSet) string {
	if cs.Spec.Rotation.DiscardGeneration == nil {
		return ""
	}
	return fmt.Sprintf(" or set spec.rotation.discardGeneration to %d", engine.TargetGeneration(cs.Spec.Rotation, cs.Status))
}

// discardDecision asks the engine what the operator does, without a
// discard annotation (spec.rotation.discardGeneration may still ask), with a Distributed set whose consumers rolled out: it
// discards by itself (Discard, or Wait for the grace period), holds an
// AfterRollout policy it cannot honour (Refuse), or waits for a person
// (None). The source Secret is taken to be intact: when it is not, the
// Degraded condition says so first.
func discardDecision(cs *v1.CredentialSet, now time.Time) engine.Decision {
	st := cs.Status
	in := engine.Input{
		Status:         st,
		DiscardRequest: engine.DiscardRequested("", cs.Spec.Rotation, st),
		Pending:        engine.PendingMatch,
		Policy:         cs.Spec.Rotation.DiscardPolicy,
		Consumers:      engine.DeclaredConsumers(cs.Spec),
		RolloutDone:    true,
		RolloutDoneAt:  now,
		Now:            now,
	}
	if st.RolledOutAt != nil {
		in.RolloutDoneAt = st.RolledOutAt.Time
	}
	if g := cs.Spec.Rotation.GracePeriod; g != nil {
		in.GracePeriod = g.Duration
	}
	return engine.Decide(in)
}

// idleStep is what an idle set waits for: a person, or its rotation
// policy (engine.Due decides; this only describes it).
func idleStep(cs *v1.CredentialSet, now time.Time) string {
	rot, st := cs.Spec.Rotation, cs.Status
	switch rot.Policy {
	case v1.PolicySchedule:
		switch at := st.NextRotationAt; {
		case at != nil && at.After(now) && len(rot.Windows) > 0:
			return windowStep(rot, st, at.Time, now)
		case at != nil && at.After(now):
			return "rotate when needed; next scheduled rotation in " + duration.HumanDuration(at.Sub(now))
		case at != nil:
			return "wait: the scheduled rotation is due; the operator starts it"
		case rot.Interval != nil:
			return "rotate when needed; policy Schedule rotates every " + duration.HumanDuration(rot.Interval.Duration)
		}
	case v1.PolicyKeyGeneration:
		if kg := rot.KeyGeneration; kg != nil && *kg > st.KeyGeneration {
			if engine.Due(engine.PolicyInput{Rotation: rot, Status: st, Now: now}).RotationID == "" {
				// Above the current generation, yet not due: the policy's
				// rotation to it was rolled back.
				return fmt.Sprintf("rotate when needed; the rotation to spec.rotation.keyGeneration %d was rolled back: raise it to ask again", *kg)
			}
			return fmt.Sprintf("wait: spec.rotation.keyGeneration %d asks for a rotation; the operator starts it", *kg)
		}
		return fmt.Sprintf("rotate when needed, or raise spec.rotation.keyGeneration above %d", st.KeyGeneration)
	case v1.PolicyWithVersionUpgrade:
		if st.KeyVersion != "" {
			return fmt.Sprintf("rotate when needed; the operator also rotates once %s runs a version newer than %s", backendName(cs), st.KeyVersion)
		}
		return fmt.Sprintf("rotate when needed; the operator also rotates when %s is upgraded", backendName(cs))
	}
	return "rotate when needed"
}

// windowStep is the next step of a schedule held by maintenance windows:
// when the next rotation starts, in the time zone of the window that opens
// then, and whether it is already due and only waits for that window.
func windowStep(rot v1.RotationSpec, st v1.CredentialSetStatus, at, now time.Time) string {
	when := "at " + at.UTC().Format("2006-01-02 15:04 MST")
	ws, err := engine.Windows(rot.Windows, at)
	if err == nil {
		w := rot.Windows[ws.Window]
		if loc, err := time.LoadLocation(w.TimeZone); err == nil && w.TimeZone != "" {
			when = "at " + at.In(loc).Format("2006-01-02 15:04 MST")
		}
		when += fmt.Sprintf(" (in %s; window %s)", duration.HumanDuration(at.Sub(now)), describeWindow(w))
	}
	if st.CurrentSince != nil && rot.Interval != nil && !now.Before(st.CurrentSince.Add(rot.Interval.Duration)) {
		return "rotate when needed; the scheduled rotation is due and waits for its maintenance window: it starts " + when
	}
	return "rotate when needed; next scheduled rotation " + when
}

// describeWindow says a window as it is written: "Sat,Sun 02:00 for 3h
// Europe/Berlin".
func describeWindow(w v1.RotationWindow) string {
	days := "daily"
	if len(w.Days) > 0 {
		names := make([]string, len(w.Days))
		for i, d := range w.Days {
			names[i] = string(d)
		}
		days = strings.Join(names, ",")
	}
	tz := w.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	return fmt.Sprintf("%s %s for %s %s", days, w.Start, duration.HumanDuration(w.Duration.Duration), tz)
}

// ackHint names the consumer groups whose members outside automation has
// not acknowledged yet: nobody but a person or that automation can move
// them on.
func ackHint(cs *v1.CredentialSet) string {
	var waiting []string
	for _, g := range cs.Spec.ConsumerGroups {
		moved := 0
		for _, c := range cs.Status.Consumers {
			if c.Kind == v1.KindGroup && c.Name == g.Name && c.SecretHash == cs.Status.SecretHash {
				moved = len(c.MembersUpdated)
			}
		}
		if moved < len(g.Members) {
			waiting = append(waiting, fmt.Sprintf("%s (%d/%d)", g.Name, moved, len(g.Members)))
		}
	}
	switch len(waiting) {
	case 0:
		return ""
	case 1:
		name, _, _ := strings.Cut(waiting[0], " ")
		return fmt.Sprintf("; acknowledge updated members of group %s: kubectl rekey ack %s --group %s --members A,B", waiting[0], cs.Name, name)
	}
	return fmt.Sprintf("; acknowledge updated members of groups %s: kubectl rekey ack %s --group GROUP --members A,B", strings.Join(waiting, ", "), cs.Name)
}

// rolledOut: every consumer (workloads and groups) runs the active
// rotation's credentials. The operator stamps rolledOutAt once they do (it
// is reset when a rotation is distributed); a set without consumers has
// nothing to wait for.
func rolledOut(cs *v1.CredentialSet) bool {
	return consumerTotal(cs) == 0 || cs.Status.RolledOutAt != nil
}

// consumerTotal counts what the operator counts in consumersUpdated:
// workloads and consumer groups.
func consumerTotal(cs *v1.CredentialSet) int {
	return engine.DeclaredConsumers(cs.Spec)
}

// consumerCount is status.consumersUpdated, or 0/m before the operator
// first reported it.
func consumerCount(cs *v1.CredentialSet) string {
	if n := cs.Status.ConsumersUpdated; n != "" {
		return n
	}
	return fmt.Sprintf("0/%d", consumerTotal(cs))
}

// progressLine is one line of --wait output at now: where the set is and
// what it waits for, with the deadline counted down. A new one is printed
// whenever progressKey changes.
func progressLine(cs *v1.CredentialSet, now time.Time) string {
	line := progressKey(cs)
	if step, ok := waitStep(cs, now); ok && cs.Status.Waiting.Until != nil {
		line += "; " + strings.TrimPrefix(step, "wait: ") + " (at " + cs.Status.Waiting.Until.UTC().Format("15:04:05 MST") + ")"
	}
	return line
}

// progressKey is progressLine without the countdown, which changes by
// itself.
func progressKey(cs *v1.CredentialSet) string {
	st := cs.Status
	parts := []string{"phase " + orDash(string(st.Phase))}
	if st.RotationID != "" {
		parts[0] += " (rotation " + st.RotationID + ")"
	}
	parts = append(parts, fmt.Sprintf("generation %d", st.KeyGeneration))
	if st.ResetPending {
		parts = append(parts, "resetPending")
	}
	if consumerTotal(cs) > 0 {
		parts = append(parts, "consumers "+consumerCount(cs)+" rolled out")
	}
	line := strings.Join(parts, ", ")
	if c := meta.FindStatusCondition(st.Conditions, reason.CondDegraded); c != nil && c.Status == "True" {
		line += "; Degraded: " + c.Message
	}
	return line
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// autoDiscards asks the engine whether the operator retires this set's old
// credentials by itself.
func autoDiscards(cs *v1.CredentialSet) bool {
	return engine.AutoDiscards(cs.Spec.Rotation.DiscardPolicy, engine.DeclaredConsumers(cs.Spec))
}

// resetStep is the next step of a rollback: the consumers roll back, then
// the grace period passes, then the backend is reset. Once they rolled
// back it names when the reset is due (with the set's gracePeriod; a set
// that gives none uses the manager's default, taken here as 5m).
func resetStep(cs *v1.CredentialSet, now time.Time) string {
	what := fmt.Sprintf("resetting %s to the current %s", backendName(cs), secretWord(cs))
	at := cs.Status.RolledOutAt
	if at == nil || consumerTotal(cs) == 0 {
		return "wait: " + what + " after the consumers rolled back"
	}
	grace := 5 * time.Minute
	if g := cs.Spec.Rotation.GracePeriod; g != nil {
		grace = g.Duration
	}
	if left := at.Add(grace).Sub(now); left > 0 {
		return fmt.Sprintf("wait: %s in %s (%s after the consumers rolled back)", what, left.Round(time.Second), graceText(cs))
	}
	return "wait: " + what + " (the consumers rolled back)"
}
