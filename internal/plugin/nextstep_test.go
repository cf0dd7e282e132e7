package plugin

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

func TestNextStep(t *testing.T) {
	at := metav1.NewTime(time.Unix(1700000000, 0))
	one := []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "api"}, {Kind: v1.KindStatefulSet, Name: "db"}}
	degraded := []metav1.Condition{{Type: reason.CondDegraded, Status: metav1.ConditionTrue, Reason: "InstanceUnreachable", Message: "instance db-1 is unreachable"}}
	healthy := []metav1.Condition{{Type: reason.CondDegraded, Status: metav1.ConditionFalse, Reason: "Healthy", Message: "no problem seen"}}
	cases := []struct {
		name      string
		st        v1.CredentialSetStatus
		consumers []v1.ConsumerRef
		policy    v1.DiscardPolicy
		want      string
	}{
		{"never reconciled", v1.CredentialSetStatus{}, nil, "", "wait: the operator has not picked this set up yet"},
		{"provisioning", v1.CredentialSetStatus{Phase: v1.PhaseIdle}, nil, "", "wait: the operator provisions the credentials"},
		{"pending", v1.CredentialSetStatus{Phase: v1.PhasePending}, nil, "", "wait: the operator provisions the credentials"},
		{"idle", v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3, Conditions: healthy}, one, "", "rotate when needed"},
		{"rotating", v1.CredentialSetStatus{Phase: v1.PhaseRotating, KeyGeneration: 3}, one, "", "wait: applying new passwords"},
		{"degraded wins", v1.CredentialSetStatus{Phase: v1.PhaseRotating, KeyGeneration: 3, Conditions: degraded}, one, "", "instance db-1 is unreachable"},
		{"rollout pending", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, ConsumersUpdated: "1/2"}, one, "", "wait for consumers to roll out (1/2)"},
		{"rollout not yet counted", v1.CredentialSetStatus{Phase: v1.PhaseDistributed}, one, "", "wait for consumers to roll out (0/2)"},
		{"rolled out, manual", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, ConsumersUpdated: "2/2", RolledOutAt: &at}, one, v1.DiscardManual, "verify, then kubectl rekey discard orders"},
		{"rolled out, policy unset", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RolledOutAt: &at}, one, "", "verify, then kubectl rekey discard orders"},
		{"no consumers, manual", v1.CredentialSetStatus{Phase: v1.PhaseDistributed}, nil, v1.DiscardManual, "verify, then kubectl rekey discard orders"},
		{"rolled out, after rollout", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RolledOutAt: &at}, one, v1.DiscardAfterRollout, "discard happens automatically"},
		// The engine finishes a discard that began, whatever the policy.
		{"discard started, manual", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, DiscardStarted: true, RolledOutAt: &at}, one, v1.DiscardManual, "discard happens automatically"},
		{"discard applied", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, DiscardApplied: true, RolledOutAt: &at}, one, "", "wait: old passwords discarded, completing the rotation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The operator records Distributed only once phase 1 applied.
			c.st.RotateApplied = c.st.RotateApplied || c.st.Phase == v1.PhaseDistributed
			cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "orders"}, Status: c.st,
				Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{}, Consumers: c.consumers, Rotation: v1.RotationSpec{DiscardPolicy: c.policy}}}
			if got := NextStep(cs); got != c.want {
				t.Errorf("NextStep = %q, want %q", got, c.want)
			}
		})
	}
}

// A set whose backend block this plugin does not know (admission requires
// one, so only a plugin older than the operator meets one) is described
// without claiming what its backend does.
func TestNextStepUnknownBackend(t *testing.T) {
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "orders"}}
	for _, c := range []struct {
		st   v1.CredentialSetStatus
		want string
	}{
		{v1.CredentialSetStatus{Phase: v1.PhaseRotating}, "wait: applying new credentials"},
		{v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, ResetPending: true}, "wait: resetting the backend to the current credentials after the consumers rolled back"},
	} {
		cs.Status = c.st
		if got := NextStep(cs); got != c.want {
			t.Errorf("NextStep(%s) = %q, want %q", c.st.Phase, got, c.want)
		}
	}
}

// TestResetStep: after a rollback the next step says what the reset waits
// for, and once the consumers rolled back, when it is due.
func TestResetStep(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }
	one := []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "api"}}
	for _, c := range []struct {
		name      string
		rolledOut *metav1.Time
		grace     *metav1.Duration
		want      string
	}{
		{"consumers rolling back", nil, nil, "wait: resetting MySQL to the current passwords after the consumers rolled back"},
		{"rolled back a minute ago, the default grace", ago(time.Minute), nil,
			"wait: resetting MySQL to the current passwords in 4m0s (gracePeriod (the manager's --default-grace-period, 5m unless set otherwise) after the consumers rolled back)"},
		{"rolled back, the set's grace", ago(10 * time.Second), &metav1.Duration{Duration: time.Minute},
			"wait: resetting MySQL to the current passwords in 50s (gracePeriod (1m0s) after the consumers rolled back)"},
		{"grace over", ago(time.Hour), nil, "wait: resetting MySQL to the current passwords (the consumers rolled back)"},
	} {
		cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "orders"},
			Spec:   v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{}, Consumers: one, Rotation: v1.RotationSpec{GracePeriod: c.grace}},
			Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, ResetPending: true, RolledOutAt: c.rolledOut}}
		if got := nextStep(cs, now); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A deleted set says what its deletion waits for, from its policy and
// status alone.
func TestNextStepWhileDeleted(t *testing.T) {
	now := metav1.NewTime(time.Unix(1700000000, 0))
	one := []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "api"}}
	cases := []struct {
		name   string
		policy v1.DeletionPolicy
		st     v1.CredentialSetStatus
		want   string
	}{
		{"idle, default policy", "", v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2},
			"being deleted (deletionPolicy Discard): wait, the operator winds it down"},
		{"idle, Delete with consumers", v1.DeletionDelete, v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2},
			"being deleted (deletionPolicy Delete): its identities go once every declared consumer is gone or removed from the spec (the UsersInUse Event names those left)"},
		{"distributed, rollout pending", "", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r1", RotateApplied: true, ConsumersUpdated: "0/1"},
			"being deleted (deletionPolicy Discard); rotation r1 finishes first: wait for consumers to roll out (0/1); or kubectl rekey abort orders, or set deletionPolicy Retain to let go as it is"},
	}
	for _, c := range cases {
		cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "orders", DeletionTimestamp: &now}, Status: c.st,
			Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{}, Consumers: one, DeletionPolicy: c.policy}}
		if got := NextStep(cs); got != c.want {
			t.Errorf("%s: NextStep = %q\nwant %q", c.name, got, c.want)
		}
	}
}
