package controller

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// TestWaitsFor: what a RotationStuck signal says the rotation waits for,
// so the person it pages knows the next step.
func TestWaitsFor(t *testing.T) {
	set := func(policy v1.DiscardPolicy, consumers ...v1.ConsumerRef) *v1.CredentialSet {
		cs := &v1.CredentialSet{}
		cs.Name, cs.Namespace = "db", "app"
		cs.Spec.Rotation.DiscardPolicy, cs.Spec.Consumers = policy, consumers
		return cs
	}
	distributed := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r1", RotateApplied: true}
	waiting := distributed
	waiting.Consumers = []v1.ConsumerStatus{{Kind: v1.KindDeployment, Name: "web", Message: "1 of 3 pods updated"}}
	retiring := distributed
	retiring.RetirementWaitsFor = []string{"app/web (2 sessions)"}
	web := v1.ConsumerRef{Kind: v1.KindDeployment, Name: "web"}
	cases := []struct {
		name string
		cs   *v1.CredentialSet
		st   v1.CredentialSetStatus
		prob *problem
		want []string
	}{
		{"a problem comes first", set(v1.DiscardManual), distributed, &problem{reason.InstanceUnreachable, "instance b is unreachable"},
			[]string{"a problem to be fixed (InstanceUnreachable): instance b is unreachable"}},
		{"rotating", set(v1.DiscardManual), v1.CredentialSetStatus{Phase: v1.PhaseRotating}, nil, []string{"every instance to accept the new secrets"}},
		{"a consumer not rolled out", set(v1.DiscardAfterRollout, web), waiting, nil, []string{"consumers to roll out", "Deployment web: 1 of 3 pods updated"}},
		{"a consumer still on the old user", set(v1.DiscardAfterRollout, web), retiring, nil, []string{"consumers to move to the new user: app/web (2 sessions)"}},
		{"Manual", set(v1.DiscardManual), distributed, nil, []string{"discardPolicy Manual", "kubectl rekey discard db -n app"}},
		{"AfterRollout without a declared consumer, whatever this reconcile's problem", set(v1.DiscardAfterRollout), distributed, nil,
			[]string{"AutoDiscardHeld", "declares no consumers", "kubectl rekey discard db -n app"}},
		{"AfterRollout, rolled out", set(v1.DiscardAfterRollout, web), distributed, nil, []string{"the grace period after the rollout"}},
	}
	for _, c := range cases {
		got := waitsFor(c.cs, c.st, c.prob)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q does not say %q", c.name, got, w)
			}
		}
	}
}
