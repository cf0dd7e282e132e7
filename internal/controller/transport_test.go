package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// reporting is a backend whose connections are unverified for why.
type reporting struct {
	engine.Backend
	why string
}

func (r reporting) InsecureTransport() string { return r.why }

func TestTransportOf(t *testing.T) {
	const why = "spec.mysql.tls.mode is Preferred: set it to VerifyIdentity"
	for _, c := range []struct {
		name string
		b    engine.Backend
		want transportSeen
	}{
		{"no network credentials", struct{ engine.Backend }{}, transportSeen{known: true}},
		{"verified", reporting{why: ""}, transportSeen{known: true}},
		{"unverified", reporting{why: why}, transportSeen{known: true, insecure: why}},
	} {
		if got := transportOf(c.b); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestTransportWarning: the InsecureTransport Warning fires once per spec
// generation (and again when what is insecure changes), decided on the
// condition as read before this reconcile writes it.
func TestTransportWarning(t *testing.T) {
	const why, other = "plaintext: set spec.rabbitmq.endpoint to https://", "TLS unverified: set spec.rabbitmq.tls.ca"
	insecureAt := func(gen int64, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: reason.CondTransportVerified, Status: metav1.ConditionFalse,
			Reason: string(reason.InsecureTransport), Message: msg, ObservedGeneration: gen}}
	}
	verifiedAt := func(gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: reason.CondTransportVerified, Status: metav1.ConditionTrue,
			Reason: string(reason.Verified), ObservedGeneration: gen}}
	}
	for _, c := range []struct {
		name  string
		conds []metav1.Condition
		gen   int64
		seen  transportSeen
		want  string
	}{
		{"no backend built", nil, 3, transportSeen{}, ""},
		{"verified", nil, 3, transportSeen{known: true}, ""},
		{"first seen", nil, 3, transportSeen{known: true, insecure: why}, why},
		{"was verified", verifiedAt(3), 3, transportSeen{known: true, insecure: why}, why},
		{"already warned this generation", insecureAt(3, why), 3, transportSeen{known: true, insecure: why}, ""},
		{"spec changed since", insecureAt(2, why), 3, transportSeen{known: true, insecure: why}, why},
		{"insecure for another reason", insecureAt(3, other), 3, transportSeen{known: true, insecure: why}, why},
	} {
		cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Generation: c.gen}, Status: v1.CredentialSetStatus{Conditions: c.conds}}
		if got := (&Reconciler{}).transportWarning(cs, c.seen); got != c.want {
			t.Errorf("%s: warning %q, want %q", c.name, got, c.want)
		}
	}
}

func TestSetTransportCondition(t *testing.T) {
	const why = "plaintext: set spec.rabbitmq.endpoint to https://"
	for _, c := range []struct {
		name   string
		seen   transportSeen
		status metav1.ConditionStatus // "" for no condition
		reason reason.Reason
		msg    string
	}{
		{"no backend built: left as it was", transportSeen{}, "", "", ""},
		{"verified", transportSeen{known: true}, metav1.ConditionTrue, reason.Verified, "every connection that carries credentials verifies the server"},
		{"unverified", transportSeen{known: true, insecure: why}, metav1.ConditionFalse, reason.InsecureTransport, why},
	} {
		var st v1.CredentialSetStatus
		setTransportCondition(&st, 4, c.seen)
		got := meta.FindStatusCondition(st.Conditions, reason.CondTransportVerified)
		switch {
		case c.status == "" && got != nil:
			t.Errorf("%s: condition %+v, want none", c.name, *got)
		case c.status == "":
		case got == nil:
			t.Errorf("%s: no condition", c.name)
		case got.Status != c.status || got.Reason != string(c.reason) || got.Message != c.msg || got.ObservedGeneration != 4:
			t.Errorf("%s: %s %s %q gen %d, want %s %s %q gen 4", c.name, got.Status, got.Reason, got.Message, got.ObservedGeneration, c.status, c.reason, c.msg)
		}
	}
}
