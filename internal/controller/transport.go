package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// transportSeen is what this reconcile learned of the backend's
// connections: known is false when no backend was built (the condition is
// then left as it was).
type transportSeen struct {
	known    bool
	insecure string
}

func transportOf(b engine.Backend) transportSeen {
	tr, ok := b.(engine.TransportReporter)
	if !ok {
		// A backend without network credentials in flight (or that
		// authenticates both ends itself, as cephx does) has nothing to
		// report.
		return transportSeen{known: true}
	}
	return transportSeen{known: true, insecure: tr.InsecureTransport()}
}

// transportWarning is the InsecureTransport Warning this reconcile owes
// ("" for none): once per spec generation that asks for unverified or
// plaintext connections — a Warning on every reconcile would bury the ones
// that need action, none would let it go unnoticed. Decided on the status
// as read, before this reconcile writes the condition; emitted after.
func (r *Reconciler) transportWarning(cs *v1.CredentialSet, seen transportSeen) string {
	if !seen.known || seen.insecure == "" {
		return ""
	}
	c := meta.FindStatusCondition(cs.Status.Conditions, reason.CondTransportVerified)
	if c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == cs.Generation && c.Message == seen.insecure {
		return ""
	}
	return seen.insecure
}

func setTransportCondition(st *v1.CredentialSetStatus, gen int64, seen transportSeen) {
	if !seen.known {
		return
	}
	c := metav1.Condition{Type: reason.CondTransportVerified, Status: metav1.ConditionTrue, Reason: string(reason.Verified),
		Message: "every connection that carries credentials verifies the server", ObservedGeneration: gen}
	if seen.insecure != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, string(reason.InsecureTransport), seen.insecure
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
