package metrics

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestLastSuccess(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name string
		st   v1.CredentialSetStatus
		ok   bool
	}{
		{"never provisioned", v1.CredentialSetStatus{}, false},
		{"provisioned, never rotated", v1.CredentialSetStatus{CurrentSince: &at, KeyGeneration: 1}, false},
		{"first rotation in flight", v1.CredentialSetStatus{CurrentSince: &at, RotationID: "r-1", Phase: v1.PhaseDistributed}, false},
		{"first rotation rolled back", v1.CredentialSetStatus{CurrentSince: &at, LastRolledBackID: "r-1"}, false},
		{"a rotation completed", v1.CredentialSetStatus{CurrentSince: &at, LastRotationID: "r-1", KeyGeneration: 2}, true},
		{"completed, the next one in flight", v1.CredentialSetStatus{CurrentSince: &at, LastRotationID: "r-1", RotationID: "r-2"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := LastSuccess(&tc.st)
			if ok != tc.ok || (ok && !got.Equal(at.Time)) {
				t.Fatalf("LastSuccess = %v, %v; want %v, %v", got, ok, at.Time, tc.ok)
			}
		})
	}
}
