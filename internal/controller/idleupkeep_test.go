package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

func TestIdleDue(t *testing.T) {
	idle := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2}
	gone := metav1.Now()
	for _, tc := range []struct {
		name        string
		st          v1.CredentialSetStatus
		pending     engine.PendingState
		noInstances bool
		deleted     bool
		want        bool
	}{
		{"Idle", idle, engine.PendingNone, false, false, true},
		{"not provisioned", v1.CredentialSetStatus{Phase: v1.PhaseIdle}, engine.PendingNone, false, false, false},
		{"Distributed: the rotation's repair instead", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, KeyGeneration: 2}, engine.PendingMatch, false, false, false},
		{"a reset owed", v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, ResetPending: true}, engine.PendingNone, false, false, false},
		{"pending secrets left in the source Secret", idle, engine.PendingMatch, false, false, false},
		{"no instances", idle, engine.PendingNone, true, false, false},
		{"being deleted", idle, engine.PendingNone, false, true, false},
	} {
		cs := &v1.CredentialSet{Status: tc.st}
		if tc.deleted {
			cs.DeletionTimestamp = &gone
		}
		if got := idleDue(cs, tc.pending, tc.noInstances); got != tc.want {
			t.Errorf("%s: idleDue = %v, want %v", tc.name, got, tc.want)
		}
	}
}
