package engine

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestWaiting: each wait Decide holds a set in is named, with the deadline
// its requeue was computed from when time alone ends it.
func TestWaiting(t *testing.T) {
	now := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	grace := 5 * time.Minute
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	web := v1.ConsumerStatus{Kind: v1.KindDeployment, Name: "web"}
	group := v1.ConsumerStatus{Kind: v1.KindGroup, Name: "vms"}
	moved := func(c v1.ConsumerStatus) v1.ConsumerStatus { c.RolledOut = true; return c }
	reset := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3, ResetPending: true, LastRolledBackID: "r4"}
	dist := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r4", KeyGeneration: 3, RotateApplied: true}
	withConsumers := func(st v1.CredentialSetStatus, cs ...v1.ConsumerStatus) v1.CredentialSetStatus {
		st.Consumers = cs
		return st
	}
	cases := []struct {
		name string
		in   Input
		want *v1.WaitStatus
	}{
		{"reset: consumers roll back first", Input{Status: withConsumers(reset, web), Consumers: 1},
			&v1.WaitStatus{For: v1.WaitRollback}},
		{"reset: gracePeriod after the rollback's rollout", Input{Status: reset, Consumers: 1, RolloutDone: true, RolloutDoneAt: ago(time.Minute)},
			&v1.WaitStatus{For: v1.WaitResetGracePeriod, Until: at(now.Add(4 * time.Minute))}},
		{"reset: gracePeriod passed, the reset runs", Input{Status: reset, Consumers: 1, RolloutDone: true, RolloutDoneAt: ago(grace)}, nil},
		{"reset: a deadline between seconds rounds up", Input{Status: reset, Consumers: 1, RolloutDone: true, RolloutDoneAt: ago(time.Minute + 300*time.Millisecond)},
			&v1.WaitStatus{For: v1.WaitResetGracePeriod, Until: at(now.Add(4 * time.Minute))}},
		{"AfterRollout: the rollout", Input{Status: withConsumers(dist, web), Policy: v1.DiscardAfterRollout, Consumers: 1},
			&v1.WaitStatus{For: v1.WaitRollout}},
		{"AfterRollout: only a group's acknowledgement", Input{Status: withConsumers(dist, moved(web), group), Policy: v1.DiscardAfterRollout, Consumers: 2},
			&v1.WaitStatus{For: v1.WaitAcknowledgement}},
		{"AfterRollout: a workload and a group", Input{Status: withConsumers(dist, web, group), Policy: v1.DiscardAfterRollout, Consumers: 2},
			&v1.WaitStatus{For: v1.WaitRollout}},
		{"AfterRollout: gracePeriod before the discard", Input{Status: dist, Policy: v1.DiscardAfterRollout, Consumers: 1, RolloutDone: true, RolloutDoneAt: ago(90 * time.Second)},
			&v1.WaitStatus{For: v1.WaitGracePeriod, Until: at(now.Add(210 * time.Second))}},
		{"AfterRollout: gracePeriod passed, the discard runs", Input{Status: dist, Policy: v1.DiscardAfterRollout, Consumers: 1, RolloutDone: true, RolloutDoneAt: ago(10 * time.Minute)}, nil},
		{"Manual: the rollout a person's discard waits for", Input{Status: withConsumers(dist, web), Consumers: 1},
			&v1.WaitStatus{For: v1.WaitRollout}},
		{"Manual: rolled out, a person decides", Input{Status: dist, Consumers: 1, RolloutDone: true, RolloutDoneAt: ago(time.Minute)}, nil},
		{"discard requested (or discardGeneration): no grace period", Input{Status: dist, DiscardRequest: "r4", Policy: v1.DiscardAfterRollout, Consumers: 1, RolloutDone: true, RolloutDoneAt: ago(time.Second)}, nil},
		{"discard requested, the rollout first", Input{Status: withConsumers(dist, web), DiscardRequest: "r4", Consumers: 1},
			&v1.WaitStatus{For: v1.WaitRollout}},
		{"discard started: it only completes", Input{Status: func() v1.CredentialSetStatus { s := withConsumers(dist, web); s.DiscardStarted = true; return s }(), Consumers: 1}, nil},
		{"rotating: it acts", Input{Status: v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r4", KeyGeneration: 3}, Pending: PendingMatch}, nil},
		{"idle: nothing to wait for", Input{Status: v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3}}, nil},
	}
	for _, tc := range cases {
		tc.in.Now, tc.in.GracePeriod = now, grace
		if tc.in.Status.Phase == v1.PhaseDistributed && tc.in.Pending == PendingNone {
			tc.in.Pending = PendingMatch
		}
		d := Decide(tc.in)
		got := Waiting(tc.in, d)
		if !sameWait(got, tc.want) {
			t.Errorf("%s: Waiting = %s, want %s (decision %s)", tc.name, waitText(got), waitText(tc.want), d.Action)
			continue
		}
		// The deadline is the one the requeue was computed from.
		if got != nil && got.Until != nil && d.Requeue > 0 && !now.Add(d.Requeue).Add(time.Second-1).Truncate(time.Second).Equal(got.Until.Time) {
			t.Errorf("%s: until %s, but the requeue comes back at %s", tc.name, got.Until.Time, now.Add(d.Requeue))
		}
	}
}

// TestWindowWaiting: a due scheduled rotation held by a closed window
// waits until it opens; one not due yet, or in an open window, does not.
func TestWindowWaiting(t *testing.T) {
	utc := func(s string) time.Time { t, _ := time.Parse("2006-01-02 15:04", s); return t }
	nightly := []v1.RotationWindow{win("02:00", 3*time.Hour, "")}
	since := metav1.NewTime(utc("2026-11-01 12:00"))
	st := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, CurrentSince: &since}
	rot := func(ws []v1.RotationWindow) v1.RotationSpec {
		return v1.RotationSpec{Policy: v1.PolicySchedule, Interval: &metav1.Duration{Duration: 28 * 24 * time.Hour}, Windows: ws}
	}
	cases := []struct {
		name string
		rot  v1.RotationSpec
		st   v1.CredentialSetStatus
		now  time.Time
		want *v1.WaitStatus
	}{
		{"due, window closed: until it opens", rot(nightly), st, utc("2026-11-29 12:00"), &v1.WaitStatus{For: v1.WaitMaintenanceWindow, Until: at(utc("2026-11-30 02:00"))}},
		{"due, window open: it starts", rot(nightly), st, utc("2026-11-30 03:00"), nil},
		{"not due yet: no wait", rot(nightly), st, utc("2026-11-20 12:00"), nil},
		{"no window: it starts when due", rot(nil), st, utc("2026-11-29 12:00"), nil},
		{"a rotation is active: no window wait", rot(nightly), func() v1.CredentialSetStatus { s := st; s.Phase, s.RotationID = v1.PhaseDistributed, "r"; return s }(), utc("2026-11-29 12:00"), nil},
	}
	for _, tc := range cases {
		got := WindowWaiting(Due(PolicyInput{Rotation: tc.rot, Status: tc.st, Now: tc.now}))
		if !sameWait(got, tc.want) {
			t.Errorf("%s: %s, want %s", tc.name, waitText(got), waitText(tc.want))
		}
	}
}

func at(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

func sameWait(a, b *v1.WaitStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.For == b.For && (a.Until == nil) == (b.Until == nil) && (a.Until == nil || a.Until.Equal(b.Until))
}

func waitText(w *v1.WaitStatus) string {
	switch {
	case w == nil:
		return "no wait"
	case w.Until == nil:
		return string(w.For)
	}
	return string(w.For) + " until " + w.Until.UTC().Format(time.RFC3339)
}

// TestResetOf: a pending reset names the rotation rolled back, or the
// recovery on an idle set, never the rotation completed before it.
func TestResetOf(t *testing.T) {
	cases := []struct {
		name     string
		st       v1.CredentialSetStatus
		recovery bool
		id       string
	}{
		{"abort of a distributed rotation", v1.CredentialSetStatus{LastRotationID: "r3", LastRolledBackID: "r4", RestartID: RollbackRestartID("r4", "41")}, false, "r4"},
		{"abort before anything was served", v1.CredentialSetStatus{LastRotationID: "r3", LastRolledBackID: "r4", RestartID: "r3"}, false, "r4"},
		{"recover of an active rotation", v1.CredentialSetStatus{LastRotationID: "r3", LastRolledBackID: "r4", LastRecoverID: "x1", RestartID: RollbackRestartID("r4", "41")}, false, "r4"},
		{"recover of an idle set", v1.CredentialSetStatus{LastRotationID: "r3", LastRolledBackID: "r2", LastRecoverID: "x1", RestartID: RecoverRestartID("x1", "41")}, true, "x1"},
		{"recover of an idle set, written before the source Secret's version was added", v1.CredentialSetStatus{LastRotationID: "r3", LastRolledBackID: "r2", LastRecoverID: "x1", RestartID: "recover-x1"}, true, "x1"},
		{"the first rotation aborted", v1.CredentialSetStatus{LastRolledBackID: "r1", RestartID: RollbackRestartID("r1", "41")}, false, "r1"},
	}
	for _, tc := range cases {
		tc.st.ResetPending = true
		if rec, id := ResetOf(tc.st); rec != tc.recovery || id != tc.id {
			t.Errorf("%s: ResetOf = %v, %q; want %v, %q", tc.name, rec, id, tc.recovery, tc.id)
		}
	}
}
