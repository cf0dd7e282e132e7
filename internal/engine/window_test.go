package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func win(start string, length time.Duration, tz string, days ...v1.Weekday) v1.RotationWindow {
	return v1.RotationWindow{Days: days, Start: start, Duration: metav1.Duration{Duration: length}, TimeZone: tz}
}

func TestWindows(t *testing.T) {
	utc := func(s string) time.Time {
		at, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			panic(err)
		}
		return at
	}
	const berlin, newYork = "Europe/Berlin", "America/New_York"
	nightly := win("02:00", 3*time.Hour, "")
	// 2026-11-23 is a Monday.
	cases := []struct {
		name   string
		ws     []v1.RotationWindow
		at     time.Time
		open   bool
		want   time.Time // the opening of the window open at `at`, or the next one
		window int
		field  string // a WindowError for this field
	}{
		{name: "no window: always open", at: utc("2026-11-23 12:00"), open: true},

		{name: "before the opening", ws: []v1.RotationWindow{nightly}, at: utc("2026-11-23 01:59"), want: utc("2026-11-23 02:00")},
		{name: "at the opening", ws: []v1.RotationWindow{nightly}, at: utc("2026-11-23 02:00"), open: true, want: utc("2026-11-23 02:00")},
		{name: "inside", ws: []v1.RotationWindow{nightly}, at: utc("2026-11-23 04:59"), open: true, want: utc("2026-11-23 02:00")},
		{name: "at the end it is closed: next night", ws: []v1.RotationWindow{nightly}, at: utc("2026-11-23 05:00"), want: utc("2026-11-24 02:00")},

		{name: "weekend only, midweek: next Saturday", ws: []v1.RotationWindow{win("02:00", 3*time.Hour, "", "Sat", "Sun")}, at: utc("2026-11-25 10:00"), want: utc("2026-11-28 02:00")},
		{name: "weekend only, Sunday after the window: next Saturday", ws: []v1.RotationWindow{win("02:00", 3*time.Hour, "", "Sat", "Sun")}, at: utc("2026-11-29 06:00"), want: utc("2026-12-05 02:00")},

		{name: "crosses midnight: open the next morning", ws: []v1.RotationWindow{win("23:00", 3*time.Hour, "", "Fri")}, at: utc("2026-11-28 01:30"), open: true, want: utc("2026-11-27 23:00")},
		{name: "crosses midnight: closed after it", ws: []v1.RotationWindow{win("23:00", 3*time.Hour, "", "Fri")}, at: utc("2026-11-28 02:00"), want: utc("2026-12-04 23:00")},
		{name: "crosses the week's end", ws: []v1.RotationWindow{win("22:00", 4*time.Hour, "", "Sun")}, at: utc("2026-11-30 01:00"), open: true, want: utc("2026-11-29 22:00")},

		{name: "days are read in the window's zone", ws: []v1.RotationWindow{win("00:30", time.Hour, "Pacific/Auckland", "Mon")}, at: utc("2026-11-22 11:45"), open: true, want: utc("2026-11-22 11:30")},
		{name: "the same instant is Sunday in UTC", ws: []v1.RotationWindow{win("00:30", time.Hour, "", "Mon")}, at: utc("2026-11-22 11:45"), want: utc("2026-11-23 00:30")},
		{name: "Berlin in winter is UTC+1", ws: []v1.RotationWindow{win("02:00", 3*time.Hour, berlin, "Sat", "Sun")}, at: utc("2026-11-25 10:00"), want: utc("2026-11-28 01:00")},
		{name: "Berlin in summer is UTC+2", ws: []v1.RotationWindow{win("02:00", 3*time.Hour, berlin)}, at: utc("2026-07-01 12:00"), want: utc("2026-07-02 00:00")},

		// Clocks spring forward in Berlin at 02:00 CET on 2026-03-29.
		{name: "spring forward: the day before", ws: []v1.RotationWindow{win("02:30", time.Hour, berlin)}, at: utc("2026-03-28 00:00"), want: utc("2026-03-28 01:30")},
		{name: "spring forward: a skipped start opens as late as the gap", ws: []v1.RotationWindow{win("02:30", time.Hour, berlin)}, at: utc("2026-03-29 00:00"), want: utc("2026-03-29 01:30")},
		{name: "spring forward: it lasts its duration", ws: []v1.RotationWindow{win("02:30", time.Hour, berlin)}, at: utc("2026-03-29 02:29"), open: true, want: utc("2026-03-29 01:30")},
		{name: "spring forward: and no longer", ws: []v1.RotationWindow{win("02:30", time.Hour, berlin)}, at: utc("2026-03-29 02:30"), want: utc("2026-03-30 00:30")},
		{name: "spring forward: a window over the gap is elapsed time", ws: []v1.RotationWindow{win("01:00", 3*time.Hour, berlin)}, at: utc("2026-03-29 02:59"), open: true, want: utc("2026-03-29 00:00")},
		{name: "spring forward: it ends 3h after it opened, 05:00 CEST", ws: []v1.RotationWindow{win("01:00", 3*time.Hour, berlin)}, at: utc("2026-03-29 03:00"), want: utc("2026-03-29 23:00")},
		// Clocks fall back in Berlin at 03:00 CEST on 2026-10-25: 02:30 comes twice.
		{name: "fall back: a doubled start opens once, the second time", ws: []v1.RotationWindow{win("02:30", time.Hour, berlin)}, at: utc("2026-10-25 00:00"), want: utc("2026-10-25 01:30")},
		{name: "fall back: the first 02:30 (CEST) is not an opening", ws: []v1.RotationWindow{win("02:30", time.Hour, berlin)}, at: utc("2026-10-25 00:45"), want: utc("2026-10-25 01:30")},
		{name: "fall back: the day after is UTC+1", ws: []v1.RotationWindow{win("02:30", time.Hour, berlin)}, at: utc("2026-10-25 02:30"), want: utc("2026-10-26 01:30")},
		// New York springs forward at 02:00 EST on 2026-03-08.
		{name: "New York spring forward", ws: []v1.RotationWindow{win("02:30", time.Hour, newYork, "Sun")}, at: utc("2026-03-08 05:00"), want: utc("2026-03-08 06:30")},

		{name: "a week-long window is always open", ws: []v1.RotationWindow{win("00:00", 168*time.Hour, "", "Mon")}, at: utc("2026-11-29 23:59"), open: true, want: utc("2026-11-23 00:00")},
		{name: "a week-long window at its boundary: the next one opens", ws: []v1.RotationWindow{win("00:00", 168*time.Hour, "", "Mon")}, at: utc("2026-11-30 00:00"), open: true, want: utc("2026-11-30 00:00")},
		{name: "a one-minute window", ws: []v1.RotationWindow{win("12:00", time.Minute, "", "Mon")}, at: utc("2026-11-23 12:01"), want: utc("2026-11-30 12:00")},

		{name: "several: the earliest next opening", ws: []v1.RotationWindow{win("02:00", 3*time.Hour, "", "Sat"), win("22:00", time.Hour, "", "Wed")}, at: utc("2026-11-24 12:00"), want: utc("2026-11-25 22:00"), window: 1},
		{name: "several open: the one that opened first", ws: []v1.RotationWindow{win("02:00", time.Hour, ""), win("01:00", 3*time.Hour, "")}, at: utc("2026-11-24 02:30"), open: true, want: utc("2026-11-24 01:00"), window: 1},

		{name: "unknown time zone", ws: []v1.RotationWindow{nightly, win("02:00", time.Hour, "Europe/Berlinn")}, at: utc("2026-11-23 12:00"), field: "spec.rotation.windows[1].timeZone"},
		{name: "bad start", ws: []v1.RotationWindow{win("24:00", time.Hour, "")}, field: "spec.rotation.windows[0].start"},
		{name: "start without leading zero", ws: []v1.RotationWindow{win("2:00", time.Hour, "")}, field: "spec.rotation.windows[0].start"},
		{name: "unknown day", ws: []v1.RotationWindow{win("02:00", time.Hour, "", "Monday")}, field: "spec.rotation.windows[0].days"},
		{name: "duration 0", ws: []v1.RotationWindow{win("02:00", 0, "")}, field: "spec.rotation.windows[0].duration"},
		{name: "duration over a week", ws: []v1.RotationWindow{win("02:00", 169*time.Hour, "")}, field: "spec.rotation.windows[0].duration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Windows(c.ws, c.at)
			if c.field != "" {
				var we *WindowError
				if !errors.As(err, &we) || we.Field != c.field || !strings.HasPrefix(err.Error(), c.field+": ") {
					t.Fatalf("error %v, want one naming %s", err, c.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Open != c.open || !got.At.Equal(c.want) || got.Window != c.window {
				t.Fatalf("Windows = open %v at %s (window %d), want open %v at %s (window %d)",
					got.Open, got.At.UTC(), got.Window, c.open, c.want.UTC(), c.window)
			}
		})
	}
}

// TestScheduleWindowDecision runs the policy and the decision as the
// controller does (Due, then Decide with its verdict): only the start of a
// scheduled rotation waits for a window; rotate requests, rotations under
// way and discards never do.
func TestScheduleWindowDecision(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			panic(err)
		}
		return v
	}
	since := metav1.NewTime(at("2026-11-22 12:00")) // due 2026-11-23 12:00
	due := "schedule-" + itoa(at("2026-11-23 12:00").Unix())
	rot := v1.RotationSpec{Policy: v1.PolicySchedule, Interval: &metav1.Duration{Duration: 24 * time.Hour},
		Windows: []v1.RotationWindow{win("02:00", 3*time.Hour, "")}} // 02:00–05:00 UTC
	badZone := rot
	badZone.Windows = []v1.RotationWindow{win("02:00", 3*time.Hour, "Mars/Olympus")}
	idle := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 1, LastRotationID: "old", CurrentSince: &since}
	rotating := idle
	rotating.Phase, rotating.RotationID = v1.PhaseRotating, due
	distributed := rotating
	distributed.Phase, distributed.RotateApplied = v1.PhaseDistributed, true

	cases := []struct {
		name        string
		rot         v1.RotationSpec
		st          v1.CredentialSetStatus
		now         string
		rotate      string // rekey.io/rotate
		discard     string // rekey.io/discard
		auto        bool   // discardPolicy AfterRollout, rolled out long ago
		want        Action
		wantID      string
		nextAt      string
		wantProblem bool
	}{
		{name: "not due, window open: nothing", rot: rot, st: idle, now: "2026-11-23 03:00", want: None, nextAt: "2026-11-24 02:00"},
		{name: "due, window closed: waits for the opening", rot: rot, st: idle, now: "2026-11-23 13:00", want: None, nextAt: "2026-11-24 02:00"},
		{name: "due, window open: starts", rot: rot, st: idle, now: "2026-11-24 02:00", want: StartRotation, wantID: due, nextAt: "2026-11-24 02:00"},
		{name: "due, late in the window: starts", rot: rot, st: idle, now: "2026-11-24 04:59", want: StartRotation, wantID: due, nextAt: "2026-11-24 02:00"},
		{name: "due, window just closed: the next night", rot: rot, st: idle, now: "2026-11-24 05:00", want: None, nextAt: "2026-11-25 02:00"},
		{name: "without windows, due: starts at once", rot: v1.RotationSpec{Policy: v1.PolicySchedule, Interval: rot.Interval}, st: idle, now: "2026-11-23 13:00",
			want: StartRotation, wantID: due, nextAt: "2026-11-23 12:00"},

		{name: "a rotate request does not wait for the window", rot: rot, st: idle, now: "2026-11-23 13:00", rotate: "by-hand", want: StartRotation, wantID: "by-hand", nextAt: "2026-11-24 02:00"},
		{name: "a rotate request before it is due neither", rot: rot, st: idle, now: "2026-11-22 13:00", rotate: "by-hand", want: StartRotation, wantID: "by-hand", nextAt: "2026-11-24 02:00"},
		{name: "a rotation started in the window goes on after it", rot: rot, st: rotating, now: "2026-11-24 06:00", want: ContinueRotation, nextAt: "2026-11-25 02:00"},
		{name: "a discard request does not wait for the window", rot: rot, st: distributed, now: "2026-11-24 06:00", discard: due, want: Discard, nextAt: "2026-11-25 02:00"},
		{name: "an automatic discard does not wait for the window", rot: rot, st: distributed, now: "2026-11-24 06:00", auto: true, want: Discard, nextAt: "2026-11-25 02:00"},

		{name: "an unknown time zone starts nothing scheduled", rot: badZone, st: idle, now: "2026-11-24 03:00", want: None, wantProblem: true},
		{name: "nor holds back a rotate request", rot: badZone, st: idle, now: "2026-11-24 03:00", rotate: "by-hand", want: StartRotation, wantID: "by-hand", wantProblem: true},
		{name: "nor a discard", rot: badZone, st: distributed, now: "2026-11-24 06:00", discard: due, want: Discard, wantProblem: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := at(c.now)
			pd := Due(PolicyInput{Rotation: c.rot, Status: c.st, Now: now})
			in := Input{Status: c.st, RotateRequest: c.rotate, DiscardRequest: c.discard, PolicyRotation: pd.RotationID,
				Pending: PendingMatch, Policy: v1.DiscardManual, RolloutDone: true, RolloutDoneAt: now, Now: now}
			if c.st.Phase == v1.PhaseRotating && c.rotate == "" {
				in.Pending = PendingNone
			}
			if c.auto {
				in.Policy, in.Consumers, in.RolloutDoneAt, in.GracePeriod = v1.DiscardAfterRollout, 1, now.Add(-time.Hour), time.Minute
			}
			d := Decide(in)
			if d.Action != c.want || d.RotationID != c.wantID {
				t.Fatalf("Decide = %s %q (reason %s: %s), want %s %q", d.Action, d.RotationID, d.Reason, d.Message, c.want, c.wantID)
			}
			if (pd.Problem != nil) != c.wantProblem {
				t.Fatalf("policy problem %v, want one: %v", pd.Problem, c.wantProblem)
			}
			switch {
			case c.nextAt == "" && pd.NextAt != nil:
				t.Fatalf("NextAt = %s, want none", pd.NextAt)
			case c.nextAt != "" && (pd.NextAt == nil || !pd.NextAt.Equal(at(c.nextAt))):
				t.Fatalf("NextAt = %v, want %s", pd.NextAt, c.nextAt)
			}
		})
	}
}
