package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestRetriesBackoff: the wait doubles from 1 s with each failure in a
// row up to 5 min, per set, and starts over once the set gets through.
func TestRetriesBackoff(t *testing.T) {
	var r retries
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	cs := &v1.CredentialSet{}
	now := time.Unix(1e9, 0)
	var waits []time.Duration
	for range 11 {
		w, _ := r.fail(a, cs, now)
		waits = append(waits, w)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if w, n := r.fail(b, cs, now); w != time.Second || n != 1 {
		t.Errorf("another set's first failure: wait %s, %d in a row; want 1s, 1", w, n)
	}
	r.reset(a)
	if w, _ := r.fail(a, cs, now); w != time.Second {
		t.Errorf("after a success the wait is %s, want 1s again", w)
	}
}

// TestHoldLeft: a wake-up before the backoff ends is held, unless a person
// changed the set since it failed (its spec, annotations, labels, or a
// deletion), which starts the backoff over.
func TestHoldLeft(t *testing.T) {
	base := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Generation: 3, Annotations: map[string]string{"a": "1"}, Labels: map[string]string{"l": "x"}}}
	failedAt := time.Unix(1e9, 0)
	h := hold{until: failedAt.Add(8 * time.Second), by: wakeKeyOf(base)}
	edit := func(f func(*v1.CredentialSet)) wakeKey {
		c := base.DeepCopy()
		f(c)
		return wakeKeyOf(c)
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name      string
		ok        bool
		key       wakeKey
		at        time.Duration // after the failure
		left      time.Duration
		wantFresh bool
	}{
		{"no failure recorded", false, wakeKeyOf(base), 0, 0, false},
		{"woken early, nothing changed", true, wakeKeyOf(base), 3 * time.Second, 5 * time.Second, false},
		{"status or resourceVersion changed only", true, edit(func(c *v1.CredentialSet) { c.ResourceVersion = "9"; c.Status.Phase = v1.PhaseRotating }), time.Second, 7 * time.Second, false},
		{"backoff over", true, wakeKeyOf(base), 8 * time.Second, 0, false},
		{"spec edited", true, edit(func(c *v1.CredentialSet) { c.Generation = 4 }), time.Second, 0, true},
		{"trigger annotation", true, edit(func(c *v1.CredentialSet) { c.Annotations[engine.RotateAnnotation] = "r1" }), time.Second, 0, true},
		{"label changed", true, edit(func(c *v1.CredentialSet) { c.Labels["l"] = "y" }), time.Second, 0, true},
		{"being deleted", true, edit(func(c *v1.CredentialSet) { c.DeletionTimestamp = &now }), time.Second, 0, true},
	} {
		left, fresh := holdLeft(h, tc.ok, tc.key, failedAt.Add(tc.at))
		if left != tc.left || fresh != tc.wantFresh {
			t.Errorf("%s: left %s fresh %v, want %s %v", tc.name, left, fresh, tc.left, tc.wantFresh)
		}
	}
}

// TestHoldingStartsOverOnChange: a person's change lets the set through at
// once and its next failure waits 1 s again.
func TestHoldingStartsOverOnChange(t *testing.T) {
	var r retries
	set := types.NamespacedName{Namespace: "ns", Name: "a"}
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	now := time.Unix(1e9, 0)
	for range 5 {
		r.fail(set, cs, now)
	}
	if left := r.holding(set, cs, now.Add(time.Second)); left != 15*time.Second {
		t.Fatalf("held %s, want 15s (16s wait, 1s in)", left)
	}
	edited := cs.DeepCopy()
	edited.Generation = 2
	if left := r.holding(set, edited, now.Add(time.Second)); left != 0 {
		t.Fatalf("an edited set is held %s", left)
	}
	if w, _ := r.fail(set, edited, now); w != time.Second {
		t.Errorf("after an edit the wait is %s, want 1s", w)
	}
}

func TestOutcomeOf(t *testing.T) {
	unreachable := &problem{reason.InstanceUnreachable, "x"}
	for _, tc := range []struct {
		name    string
		fromErr bool
		prob    *problem
		requeue time.Duration
		want    outcome
	}{
		{"got through", false, nil, 0, succeeded},
		{"got through, rechecks later", false, nil, time.Minute, succeeded},
		{"backend error", true, &problem{reason.BackendError, "x"}, 0, failed},
		{"unreachable", true, unreachable, 10 * time.Second, failed},
		{"refusal from the backend", true, &problem{reason.DualPasswordExists, "x"}, time.Minute, failed},
		{"health gate polls", true, &problem{reason.ClusterUnhealthy, "x"}, 10 * time.Second, waiting},
		{"rollout wait", false, &problem{reason.RotateRefused, "x"}, 15 * time.Second, waiting},
		{"repair check of a Distributed set", false, unreachable, 10 * time.Second, waiting},
		{"problem nothing rechecks", false, &problem{reason.DistributionFailed, "x"}, 0, failed},
		{"credential refused", true, &problem{reason.AuthenticationFailed, "x"}, 10 * time.Second, refused},
		{"privilege missing", true, &problem{reason.PermissionDenied, "x"}, 10 * time.Second, failed},
	} {
		if got := outcomeOf(tc.fromErr, tc.prob, tc.requeue); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestRepeatedFailureSameProblem: two identical failures in a row make
// the very same problem (the condition and the Event), so the second
// writes nothing new.
func TestRepeatedFailureSameProblem(t *testing.T) {
	r := &Reconciler{}
	for _, err := range []error{
		errors.New("dial tcp 127.0.0.1:1: connect: connection refused"),
		&engine.UnreachableError{Instance: "db-0:3306", Err: errors.New("connection refused")},
	} {
		var msgs []string
		for range 3 {
			a := &attempt{}
			_, prob, rerr := r.triage(withAttempt(context.Background(), a), ctrl.Result{}, nil, err)
			if prob == nil {
				t.Fatalf("%v: no problem", err)
			}
			if a.outcome != failed {
				t.Errorf("%v: outcome %d, want failed", err, a.outcome)
			}
			if prob.reason == reason.InstanceUnreachable && rerr != nil {
				t.Errorf("%v: a classified problem is returned as an error too", err)
			}
			msgs = append(msgs, prob.message)
		}
		if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
			t.Errorf("%v: the message changes from one failure to the next: %q", err, msgs)
		}
	}
}

// TestSetUpdateWakes: a person's change and a step forward wake a set; a
// status write that only restates its conditions does not.
func TestSetUpdateWakes(t *testing.T) {
	base := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Generation: 1, ResourceVersion: "1"},
		Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 1, ObservedGeneration: 1}}
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		edit func(*v1.CredentialSet)
		want bool
	}{
		{"conditions rewritten", func(c *v1.CredentialSet) {
			c.ResourceVersion = "2"
			c.Status.Conditions = []metav1.Condition{{Type: reason.CondDegraded, Status: metav1.ConditionTrue, Reason: "BackendError", Message: "x"}}
		}, false},
		{"observedGeneration only", func(c *v1.CredentialSet) { c.Status.ObservedGeneration = 2 }, false},
		{"spec", func(c *v1.CredentialSet) { c.Generation = 2 }, true},
		{"trigger annotation", func(c *v1.CredentialSet) { c.Annotations = map[string]string{engine.RotateAnnotation: "r1"} }, true},
		{"label", func(c *v1.CredentialSet) { c.Labels = map[string]string{"team": "a"} }, true},
		{"finalizer", func(c *v1.CredentialSet) { c.Finalizers = []string{"x"} }, true},
		{"deletion", func(c *v1.CredentialSet) { c.DeletionTimestamp = &now }, true},
		{"phase moved on", func(c *v1.CredentialSet) { c.Status.Phase = v1.PhaseRotating }, true},
		{"consumer rolled out", func(c *v1.CredentialSet) { c.Status.RolledOutAt = &now }, true},
	} {
		cur := base.DeepCopy()
		tc.edit(cur)
		if got := setUpdateWakes(base, cur); got != tc.want {
			t.Errorf("%s: wakes %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFirstPhase: a set is Pending, never Idle, until generation 1 is
// provisioned, also when a manager before Pending existed recorded it as
// Idle; any other phase stays as it is.
func TestFirstPhase(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   v1.CredentialSetStatus
		want v1.RotationPhase
	}{
		{"new", v1.CredentialSetStatus{}, v1.PhasePending},
		{"pending", v1.CredentialSetStatus{Phase: v1.PhasePending}, v1.PhasePending},
		{"idle, never provisioned", v1.CredentialSetStatus{Phase: v1.PhaseIdle}, v1.PhasePending},
		{"provisioned", v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 1}, v1.PhaseIdle},
		{"rotating", v1.CredentialSetStatus{Phase: v1.PhaseRotating, KeyGeneration: 1, RotationID: "r"}, v1.PhaseRotating},
		{"no phase but a generation", v1.CredentialSetStatus{KeyGeneration: 2}, v1.PhaseIdle},
	} {
		if got := firstPhase(tc.st); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestRefusedCredentialHeldUntilChanged: a set whose credential the
// backend refused is not tried again with time (each try would be one
// more refused login toward an account lock), only once a person changes
// it: an annotation is enough.
func TestRefusedCredentialHeldUntilChanged(t *testing.T) {
	var r retries
	set := types.NamespacedName{Namespace: "ns", Name: "a"}
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	now := time.Unix(1e9, 0)
	r.holdForPerson(set, cs, now)
	for _, later := range []time.Duration{time.Minute, backoffMax, 24 * time.Hour, 30 * 24 * time.Hour} {
		if left := r.holding(set, cs, now.Add(later)); left <= 0 {
			t.Fatalf("tried again %s later with nothing changed", later)
		}
	}
	touched := cs.DeepCopy()
	touched.Annotations = map[string]string{"rekey.io/retry": "1"}
	if left := r.holding(set, touched, now.Add(time.Minute)); left != 0 {
		t.Fatalf("an annotated set is still held %s", left)
	}
}
