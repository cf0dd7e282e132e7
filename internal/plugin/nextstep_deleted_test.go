package plugin

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// A deleted Idle set whose wind-down the operator holds for a second
// password (Degraded DualPasswordExists) names recover, not a wait.
func TestNextStepDeletedHeldForSecond(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "db", DeletionTimestamp: &now},
		Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 1, Conditions: []metav1.Condition{
			{Type: reason.CondDegraded, Status: metav1.ConditionTrue, Reason: string(reason.DualPasswordExists)}}}}
	if got := nextStep(cs, now.Time); !strings.Contains(got, "kubectl rekey recover db") || strings.Contains(got, "wait") {
		t.Errorf("next step %q, want kubectl rekey recover db", got)
	}
	cs.Status.Conditions = nil
	if got := nextStep(cs, now.Time); !strings.Contains(got, "winds it down") {
		t.Errorf("next step %q without the hold, want the wind-down", got)
	}
}
