package engine

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// spec.rotation.discardGeneration is a discard request for the rotation
// that produces that generation, and nothing else: it passes the same
// gates as the annotation.
func TestDiscardRequested(t *testing.T) {
	g := func(n int64) *int64 { return &n }
	rot := func(keygen, discard int64) v1.RotationSpec {
		r := v1.RotationSpec{}
		if keygen > 0 {
			r.Policy, r.KeyGeneration = v1.PolicyKeyGeneration, g(keygen)
		}
		if discard > 0 {
			r.DiscardGeneration = g(discard)
		}
		return r
	}
	st := func(phase v1.RotationPhase, applied bool, cur, target int64) v1.CredentialSetStatus {
		s := v1.CredentialSetStatus{Phase: phase, KeyGeneration: cur, TargetGeneration: target, RotateApplied: applied, LastRotationID: "old"}
		if phase != v1.PhaseIdle {
			s.RotationID = "keygeneration-5"
		}
		return s
	}
	distributed := st(v1.PhaseDistributed, true, 4, 5)
	cases := []struct {
		name       string
		annotation string
		rot        v1.RotationSpec
		st         v1.CredentialSetStatus
		rolledOut  bool
		want       string
		action     Action
	}{
		{"the generation the rotation produces discards it", "", rot(5, 5), distributed, true, "keygeneration-5", Discard},
		{"without a policy too (a rotate request's rotation)", "", rot(0, 5), distributed, true, "keygeneration-5", Discard},
		{"it waits for the rollout like a request", "", rot(5, 5), distributed, false, "keygeneration-5", Wait},
		{"the previous generation does not", "", rot(5, 4), distributed, true, "", None},
		{"a later generation does not (no auto-discard of the next one)", "", rot(5, 6), distributed, true, "", None},
		{"unset does not", "", rot(5, 0), distributed, true, "", None},
		{"while Rotating it is not a request yet", "", rot(5, 5), st(v1.PhaseRotating, true, 4, 5), true, "", ContinueRotation},
		{"when idle at that generation it is done", "", rot(5, 5), st(v1.PhaseIdle, false, 5, 0), true, "", None},
		{"the annotation wins", "r9", rot(5, 5), distributed, true, "r9", Refuse},
	}
	// Before the new secrets applied everywhere a request would be
	// refused and removed; a spec cannot be removed, so it does not count.
	if got := DiscardRequested("", rot(5, 5), st(v1.PhaseDistributed, false, 4, 5)); got != "" {
		t.Fatalf("DiscardRequested before the rotation applied = %q, want none", got)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := DiscardRequested(c.annotation, c.rot, c.st)
			if got != c.want {
				t.Fatalf("DiscardRequested = %q, want %q", got, c.want)
			}
			d := Decide(Input{Status: c.st, DiscardRequest: got, Pending: PendingMatch, Policy: v1.DiscardManual, RolloutDone: c.rolledOut})
			if d.Action != c.action {
				t.Fatalf("Decide = %s (%s: %s), want %s", d.Action, d.Reason, d.Message, c.action)
			}
			if d.Action == Refuse && d.Reason != reason.DiscardSkipped {
				t.Fatalf("refused with %s, want DiscardSkipped for a stale annotation", d.Reason)
			}
		})
	}
}
