package plugin

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// NextStep says in words what happens next for a set, from its status (and
// its discard policy) alone, so that it never disagrees with what the
// operator recorded.
func NextStep(cs *v1.CredentialSet) string {
	st := cs.Status
	if c := meta.FindStatusCondition(st.Conditions, reason.CondDegraded); c != nil && c.Status == "True" {
		return c.Message
	}
	if st.ResetPending {
		return "wait: resetting MySQL to the current passwords after the consumers rolled back"
	}
	switch st.Phase {
	case v1.PhaseIdle:
		if st.KeyGeneration == 0 {
			return "wait: the operator provisions the credentials"
		}
		return "rotate when needed"
	case v1.PhaseRotating:
		return "wait: applying new passwords"
	case v1.PhaseDistributed:
		if st.DiscardApplied {
			return "wait: old passwords discarded, completing the rotation"
		}
		if !rolledOut(cs) {
			return fmt.Sprintf("wait for consumers to roll out (%s)", consumerCount(cs))
		}
		if cs.Spec.Rotation.DiscardPolicy == v1.DiscardAfterRollout {
			return "discard happens automatically"
		}
		return "verify, then kubectl rekey discard " + cs.Name
	default:
		return "wait: the operator has not picked this set up yet"
	}
}

// rolledOut: every consumer runs the active rotation's credentials. The
// operator stamps rolledOutAt once they do (it is reset when a rotation is
// distributed); a set without consumers has nothing to wait for.
func rolledOut(cs *v1.CredentialSet) bool {
	return len(cs.Spec.Consumers) == 0 || cs.Status.RolledOutAt != nil
}

// consumerCount is status.consumersUpdated, or 0/m before the operator
// first reported it.
func consumerCount(cs *v1.CredentialSet) string {
	if n := cs.Status.ConsumersUpdated; n != "" {
		return n
	}
	return fmt.Sprintf("0/%d", len(cs.Spec.Consumers))
}

// progressLine is one line of --wait output; a new one is printed whenever
// it changes.
func progressLine(cs *v1.CredentialSet) string {
	st := cs.Status
	parts := []string{"phase " + orDash(string(st.Phase))}
	if st.RotationID != "" {
		parts[0] += " (rotation " + st.RotationID + ")"
	}
	parts = append(parts, fmt.Sprintf("generation %d", st.KeyGeneration))
	if st.ResetPending {
		parts = append(parts, "resetPending")
	}
	if len(cs.Spec.Consumers) > 0 {
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
