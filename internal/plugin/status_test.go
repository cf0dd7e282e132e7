package plugin

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// event writes an Event about cs as the operator's events.k8s.io recorder
// would, happening at when.
func event(t *testing.T, cs *v1.CredentialSet, typ string, why reason.Reason, note string, when time.Time) {
	t.Helper()
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: cs.Namespace, GenerateName: cs.Name + "-"},
		EventTime:           metav1.NewMicroTime(when),
		ReportingController: "rekey.io/test", ReportingInstance: "test",
		Action: "Reconcile", Reason: string(why), Type: typ, Note: note,
		Regarding: corev1.ObjectReference{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet",
			Namespace: cs.Namespace, Name: cs.Name, UID: cs.UID},
	}
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

var cellSep = regexp.MustCompile(`\s{3,}`)

// rows splits the status table into cells (tabwriter pads with 3+ spaces;
// cells hold at most single spaces).
func rows(out string) [][]string {
	var r [][]string
	for _, l := range lines(out) {
		r = append(r, cellSep.Split(l, -1))
	}
	return r
}

func TestStatusTableAndNextSteps(t *testing.T) {
	ns := namespace(t)
	now := time.Now()
	since := func(d time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(-d)); return &m }
	degraded := metav1.Condition{Type: reason.CondDegraded, Status: metav1.ConditionTrue, Reason: string(reason.InstanceUnreachable),
		Message: "instance db-1 is unreachable, so this phase is on hold", LastTransitionTime: metav1.NewTime(now)}
	sets := []struct {
		name   string
		policy v1.DiscardPolicy
		st     v1.CredentialSetStatus
	}{
		{"a-idle", "", v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3, CurrentSince: since(5 * time.Hour), ConsumersUpdated: "1/1"}},
		{"b-rotating", "", v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r-b", KeyGeneration: 1, CurrentSince: since(72 * time.Hour)}},
		{"c-pending", "", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r-c", RotateApplied: true, KeyGeneration: 2, CurrentSince: since(72 * time.Hour), ConsumersUpdated: "0/1"}},
		{"d-manual", "", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r-d", RotateApplied: true, KeyGeneration: 2, CurrentSince: since(72 * time.Hour), ConsumersUpdated: "1/1", RolledOutAt: since(time.Minute)}},
		{"e-auto", v1.DiscardAfterRollout, v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r-e", RotateApplied: true, KeyGeneration: 2, CurrentSince: since(72 * time.Hour), ConsumersUpdated: "1/1", RolledOutAt: since(time.Minute)}},
		{"f-degraded", "", v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r-f", KeyGeneration: 1, CurrentSince: since(72 * time.Hour), Conditions: []metav1.Condition{degraded}}},
	}
	for _, s := range sets {
		cs := hostsSet(ns, s.name)
		cs.Spec.Rotation.DiscardPolicy = s.policy
		create(t, cs)
		setStatus(t, ns, s.name, func(st *v1.CredentialSetStatus) { *st = s.st })
	}
	a := get(t, ns, "a-idle")
	event(t, a, "Normal", reason.RotationStarted, "rotation r-a started", now.Add(-10*time.Minute))
	event(t, a, "Normal", reason.RotationCompleted, "rotation r-a complete", now.Add(-time.Minute))
	event(t, a, "Normal", reason.Distributed, "distributed", now.Add(-5*time.Minute))
	// A namesake of another kind is not about the set.
	if err := k8s.Create(context.Background(), &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "a-idle-"}, EventTime: metav1.NewMicroTime(now),
		ReportingController: "deployment-controller", ReportingInstance: "x", Action: "Scale", Reason: "ScalingReplicaSet", Type: "Normal",
		Regarding: corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "a-idle"},
	}); err != nil {
		t.Fatal(err)
	}
	f := get(t, ns, "f-degraded")
	event(t, f, "Warning", reason.InstanceUnreachable, degraded.Message, now)

	out, _, err := kubectl(t, ns, "status")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"NAME", "PHASE", "STEP", "GENERATION", "ROTATION", "AGE", "CONSUMERS", "LAST EVENT", "NEXT STEP"},
		{"a-idle", "Idle", "-", "3", "-", "5h", "1/1", "RotationCompleted", "rotate when needed"},
		{"b-rotating", "Rotating", "-", "1", "r-b", "3d", "-", "-", "wait: applying new passwords"},
		{"c-pending", "Distributed", "-", "2", "r-c", "3d", "0/1", "-", "wait for consumers to roll out (0/1)"},
		{"d-manual", "Distributed", "-", "2", "r-d", "3d", "1/1", "-", "verify, then kubectl rekey discard d-manual"},
		{"e-auto", "Distributed", "-", "2", "r-e", "3d", "1/1", "-", "discard happens automatically"},
		{"f-degraded", "Rotating", "-", "1", "r-f", "3d", "-", "InstanceUnreachable", degraded.Message},
	}
	got := rows(out)
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("status table:\n%s\ncells %q\nwant  %q", out, got, want)
	}

	out, _, err = kubectl(t, ns, "status", "c-pending")
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(out); len(got) != 2 || got[1][0] != "c-pending" {
		t.Fatalf("status c-pending printed:\n%s", out)
	}

	empty := namespace(t)
	out, errOut, err := kubectl(t, empty, "status")
	if err != nil || out != "" || errOut != `no credentialsets in namespace "`+empty+`"`+"\n" {
		t.Fatalf("empty namespace: %v, stdout %q, stderr %q", err, out, errOut)
	}
}
