package cephkube

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

func TestCapsCheckDue(t *testing.T) {
	checked := func(specGen, keyGen int64) []metav1.Condition {
		return []metav1.Condition{{Type: reason.CondCapsMatch, ObservedGeneration: specGen,
			Message: "every entity's caps in the cluster are the spec's " + capsCheckedAt(keyGen)}}
	}
	set := func(phase v1.RotationPhase, keyGen int64, conds []metav1.Condition) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Status: v1.CredentialSetStatus{Phase: phase, KeyGeneration: keyGen, Conditions: conds}}
	}
	deleting := set(v1.PhaseIdle, 2, nil)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	resetting := set(v1.PhaseIdle, 2, nil)
	resetting.Status.ResetPending = true
	for _, tc := range []struct {
		name string
		cs   *v1.CredentialSet
		want bool
	}{
		{"idle, never compared", set(v1.PhaseIdle, 2, nil), true},
		{"compared for this spec and key generation", set(v1.PhaseIdle, 2, checked(3, 2)), false},
		{"the spec changed since", set(v1.PhaseIdle, 2, checked(2, 2)), true},
		{"a rotation completed since", set(v1.PhaseIdle, 3, checked(3, 2)), true},
		{"key generation 12 is not 2", set(v1.PhaseIdle, 12, checked(3, 2)), true},
		{"rotating: not while keys change", set(v1.PhaseDistributed, 2, nil), false},
		{"not provisioned", set(v1.PhaseIdle, 0, nil), false},
		{"being deleted", deleting, false},
		{"a rollback's reset pending", resetting, false},
	} {
		if got := capsCheckDue(tc.cs); got != tc.want {
			t.Errorf("%s: capsCheckDue = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := withoutCheckedAt("x differs " + capsCheckedAt(4)); got != "x differs" {
		t.Errorf("withoutCheckedAt = %q", got)
	}
}
