package plugin

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// TestRollbackAsksTheEngine: abort and recover offer a rollback exactly
// when the engine would roll back on the request, and say in the
// backend's words why not otherwise. No API server: both are decisions on
// spec and status.
func TestRollbackAsksTheEngine(t *testing.T) {
	with := func(phase v1.RotationPhase, f func(*v1.CredentialSetStatus)) v1.CredentialSetStatus {
		st := v1.CredentialSetStatus{Phase: phase, RotationID: "r1", KeyGeneration: 2, RotateApplied: phase == v1.PhaseDistributed}
		if f != nil {
			f(&st)
		}
		return st
	}
	started := func(s *v1.CredentialSetStatus) { s.DiscardStarted = true }
	applied := func(s *v1.CredentialSetStatus) { s.DiscardStarted, s.DiscardApplied = true, true }
	rotated := func(s *v1.CredentialSetStatus) { s.RotateApplied = true }
	mysql, inPlace := hostsSet("ns", "s"), cephSet("ns", "s", v1.CephInPlace, "client.a")
	overlap, rabbit := cephSet("ns", "s", v1.CephOverlapping, "client.a"), rabbitSet("ns", "s")
	cases := []struct {
		name string
		cs   *v1.CredentialSet
		st   v1.CredentialSetStatus
		// refused is what abort and recover say instead of rolling back,
		// "" when both go ahead.
		refused string
	}{
		{"mysql rotating", mysql, with(v1.PhaseRotating, nil), ""},
		{"mysql distributed", mysql, with(v1.PhaseDistributed, nil), ""},
		{"mysql discard started", mysql, with(v1.PhaseDistributed, started), "began discarding the old passwords, so some instances may refuse them already and"},
		{"mysql discard applied", mysql, with(v1.PhaseDistributed, applied), "already discarded the old passwords on every instance, so"},
		{"ceph in place, not rotated yet", inPlace, with(v1.PhaseRotating, nil), ""},
		{"ceph in place, rotated", inPlace, with(v1.PhaseRotating, rotated), "replaced the keys in place (Ceph InPlace), so the old keys no longer exist and"},
		{"ceph overlapping, applied", overlap, with(v1.PhaseDistributed, nil), ""},
		{"ceph overlapping, prior entities removed", overlap, with(v1.PhaseDistributed, applied), "already removed the prior entities, so"},
		{"rabbitmq distributed", rabbit, with(v1.PhaseDistributed, nil), ""},
		{"rabbitmq old user deleted", rabbit, with(v1.PhaseDistributed, applied), "already deleted the old user, so"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := c.cs.DeepCopy()
			cs.Status = c.st
			cs.Status.Conditions = []metav1.Condition{{Type: reason.CondDegraded, Status: metav1.ConditionTrue,
				Reason: string(reason.StaleRotationPending), Message: "another rotation's pending secrets"}}
			id, abortErr := abortable(cs)
			d, recoverErr := diagnose(cs, "req-1")
			if c.refused == "" {
				if abortErr != nil || id != "r1" {
					t.Errorf("abortable = %q, %v; want r1", id, abortErr)
				}
				if recoverErr != nil || !strings.HasPrefix(d.intro, "The operator rolls rotation r1 back") {
					t.Errorf("diagnose = %+v, %v; want a rollback of r1", d, recoverErr)
				}
				return
			}
			want := `rotation r1 of credentialset "s" ` + c.refused
			if abortErr == nil || !strings.HasPrefix(abortErr.Error(), want+" rolling it back would lock consumers out: it can only complete") {
				t.Errorf("abortable = %q, %v; want the refusal %q", id, abortErr, want)
			}
			if recoverErr == nil || !strings.HasPrefix(recoverErr.Error(), want+" it cannot be rolled back: it can only complete") {
				t.Errorf("diagnose = %v; want the refusal %q", recoverErr, want)
			}
		})
	}
}

// TestNothingToAbortWhileIdle: an idle set has no rotation for the engine
// to roll back; a finishing rollback is named.
func TestNothingToAbortWhileIdle(t *testing.T) {
	cs := hostsSet("ns", "s")
	cs.Status = v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2}
	if _, err := abortable(cs); err == nil || err.Error() != `credentialset "s" has nothing to abort: no rotation is active (phase Idle)` {
		t.Errorf("abortable on an idle set: %v", err)
	}
	cs.Status.ResetPending = true
	if _, err := abortable(cs); err == nil || !strings.Contains(err.Error(), "a rollback is finishing") {
		t.Errorf("abortable during a reset: %v", err)
	}
}
