package controller

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/naming"
)

func TestNextDeletionStep(t *testing.T) {
	idle := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2}
	pending := v1.CredentialSetStatus{Phase: v1.PhasePending}
	rotating := v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r1"}
	distributed := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r1", RotateApplied: true}
	resetting := v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true}
	cases := []struct {
		name        string
		policy      v1.DeletionPolicy
		st          v1.CredentialSetStatus
		terminating bool
		want        deletionStep
	}{
		{"default policy, idle: wind down", "", idle, false, windDown},
		{"never provisioned: wind down (nothing in flight)", v1.DeletionDiscard, pending, false, windDown},
		{"discard while rotating: the rotation finishes first", v1.DeletionDiscard, rotating, false, finishRotation},
		{"delete while distributed: the rotation finishes first", v1.DeletionDelete, distributed, false, finishRotation},
		{"a rollback's reset finishes first", v1.DeletionDiscard, resetting, false, finishRotation},
		{"retain lets go in any phase", v1.DeletionRetain, distributed, false, letGo},
		{"retain lets go when idle", v1.DeletionRetain, idle, false, letGo},
		{"a terminating namespace winds down at once", v1.DeletionDiscard, distributed, true, windDown},
		{"retain wins over a terminating namespace", v1.DeletionRetain, rotating, true, letGo},
	}
	for _, c := range cases {
		if got := nextDeletionStep(c.policy, c.st, c.terminating); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}

func TestWantedFinalizers(t *testing.T) {
	set := func(policy v1.DeletionPolicy) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"}, Spec: v1.CredentialSetSpec{
			DeletionPolicy: policy,
			Consumers:      []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "web"}},
		}}
	}
	consumer := naming.ConsumerFinalizer(v1.KindDeployment, "app", "web")
	cases := []struct {
		policy v1.DeletionPolicy
		want   []string
	}{
		{"", []string{naming.DeprovisionFinalizer}},
		{v1.DeletionDiscard, []string{naming.DeprovisionFinalizer}},
		{v1.DeletionDelete, []string{naming.DeprovisionFinalizer, consumer}},
		// Kept: a policy edited right before the deletion must still find it.
		{v1.DeletionRetain, []string{naming.DeprovisionFinalizer}},
	}
	for _, c := range cases {
		if got := wantedFinalizers(set(c.policy)); !slices.Equal(got, c.want) {
			t.Errorf("policy %q: got %v, want %v", c.policy, got, c.want)
		}
	}
}

// TestDeletionWaitNote: the DeletionWaiting event names abort only where
// abort can roll the rotation back: not for a backend that replaces the
// credentials in place (it may have applied already), nor once the
// discard began, nor during a rollback.
func TestDeletionWaitNote(t *testing.T) {
	set := func(st v1.CredentialSetStatus) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Status: st}
	}
	rotating := v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r1"}
	distributed := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r1", RotateApplied: true}
	discarding := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r1", RotateApplied: true, DiscardStarted: true}
	resetting := v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true, LastRolledBackID: "r1"}
	for _, c := range []struct {
		name    string
		st      v1.CredentialSetStatus
		overlap bool
		abort   bool
		says    string
	}{
		{"overlapping, rotating", rotating, true, true, "completes first"},
		{"overlapping, distributed", distributed, true, true, "kubectl rekey discard db"},
		{"in place, rotating", rotating, false, false, "replaces the credentials in place"},
		{"in place, distributed", distributed, false, false, "kubectl rekey discard db"},
		{"discarding", discarding, true, false, "cannot roll back any more"},
		{"a rollback's reset", resetting, false, false, "the rollback completes first"},
		{"overlapping, the current key changed outside rekey, distributed", distributed, true, false, "no longer accepts"},
		{"overlapping, the current key changed outside rekey, rotating", rotating, true, false, "no longer accepts"},
	} {
		noRollback := ""
		if !c.overlap {
			noRollback = "it replaces the credentials in place"
		}
		if strings.Contains(c.name, "changed outside rekey") {
			noRollback = "the backend no longer accepts the current credentials (changed outside rekey)"
		}
		note := deletionWaitNote(set(c.st), noRollback)
		if got := strings.Contains(note, "kubectl rekey abort"); got != c.abort {
			t.Errorf("%s: names abort %v, want %v: %s", c.name, got, c.abort, note)
		}
		if !strings.Contains(note, c.says) {
			t.Errorf("%s: %q does not say %q", c.name, note, c.says)
		}
	}
}
