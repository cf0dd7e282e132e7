package plugin

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// TestShortStep: a next step fits the table; a long one is cut at a word
// and says where the rest is, a short one is left alone.
func TestShortStep(t *testing.T) {
	long := "instance 10.0.0.5:3306 did not answer: MySQL error 1045 (access denied: the password is wrong, or no account of that name may log in from rekey's host) for user ops-admin; fix the Secret ops-admin key password"
	for _, tc := range []struct{ step, want string }{
		{"rotate when needed", "rotate when needed"},
		{strings.Repeat("x", stepCell), strings.Repeat("x", stepCell)},
		{long, "instance 10.0.0.5:3306 did not answer: MySQL error 1045 (access … (-v: in full)"},
	} {
		got := shortStep(tc.step)
		if got != tc.want || utf8.RuneCountInString(got) > stepCell {
			t.Errorf("shortStep(%.30q…) = %q (%d), want %q", tc.step, got, utf8.RuneCountInString(got), tc.want)
		}
	}
}

// TestDetails: -v gives the full next step, every condition and every
// consumer with its state.
func TestDetails(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	long := "instance 10.0.0.5:3306 does not answer: " + strings.Repeat("a long reason ", 12) + "; it resumes by itself"
	moved := ago(3 * time.Minute)
	cs := v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}, Status: v1.CredentialSetStatus{
		Phase: v1.PhaseDistributed, RotationID: "r1", KeyGeneration: 2,
		Conditions: []metav1.Condition{{Type: reason.CondDegraded, Status: "True", Reason: "InstanceUnreachable", Message: long, LastTransitionTime: ago(time.Minute)}},
		Consumers: []v1.ConsumerStatus{
			{Kind: v1.KindDeployment, Name: "api", RolledOut: true, MovedAt: &moved},
			{Kind: v1.KindStatefulSet, Namespace: "jobs", Name: "worker", Message: "2 of 3 pods updated"},
		},
	}}
	var b bytes.Buffer
	writeDetails(&b, []v1.CredentialSet{cs}, now)
	for _, want := range []string{
		"shop/db:\n  next step: " + long + "\n",
		"    Degraded=True InstanceUnreachable (60s ago): " + long + "\n",
		"    Deployment api: rolled out 3m ago\n",
		"    StatefulSet jobs/worker: waiting (2 of 3 pods updated)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("details lack %q:\n%s", want, b.String())
		}
	}
}
