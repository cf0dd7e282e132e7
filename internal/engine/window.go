package engine

import (
	"fmt"
	"time"
	// The manager's image carries no zoneinfo of its own: without the
	// embedded database every window with a timeZone would be refused.
	_ "time/tzdata"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// maxWindow bounds a window's duration (admission enforces the same): a
// longer one would overlap its own next opening.
const maxWindow = 7 * 24 * time.Hour

var weekdays = map[v1.Weekday]time.Weekday{
	"Sun": time.Sunday, "Mon": time.Monday, "Tue": time.Tuesday, "Wed": time.Wednesday,
	"Thu": time.Thursday, "Fri": time.Friday, "Sat": time.Saturday,
}

// window is a RotationWindow read into what the arithmetic needs.
type window struct {
	days         [7]bool
	hour, minute int
	length       time.Duration
	loc          *time.Location
}

// WindowError names the field of a window the manager cannot use, so that
// the condition tells the user what to fix. Admission refuses the same
// mistakes except an unknown time zone, which only the zone database knows.
type WindowError struct {
	Field string
	Msg   string
}

func (e *WindowError) Error() string { return e.Field + ": " + e.Msg }

func parseWindow(i int, w v1.RotationWindow) (window, error) {
	field := func(f string) string { return fmt.Sprintf("spec.rotation.windows[%d].%s", i, f) }
	var p window
	if len(w.Days) == 0 {
		p.days = [7]bool{true, true, true, true, true, true, true}
	}
	for _, d := range w.Days {
		wd, ok := weekdays[d]
		if !ok {
			return p, &WindowError{field("days"), fmt.Sprintf("%q is not a day: use Mon, Tue, Wed, Thu, Fri, Sat or Sun", d)}
		}
		p.days[wd] = true
	}
	if _, err := fmt.Sscanf(w.Start, "%02d:%02d", &p.hour, &p.minute); err != nil || len(w.Start) != 5 ||
		p.hour < 0 || p.hour > 23 || p.minute < 0 || p.minute > 59 {
		return p, &WindowError{field("start"), fmt.Sprintf("%q is not a time of day: use HH:MM on a 24-hour clock, e.g. 02:00", w.Start)}
	}
	if p.length = w.Duration.Duration; p.length <= 0 || p.length > maxWindow {
		return p, &WindowError{field("duration"), fmt.Sprintf("%s is not a window's length: use more than 0 and at most 168h, e.g. 3h", p.length)}
	}
	p.loc = time.UTC
	if w.TimeZone != "" {
		loc, err := time.LoadLocation(w.TimeZone)
		if err != nil {
			return p, &WindowError{field("timeZone"), fmt.Sprintf("%q is not a time zone this manager knows: use an IANA name such as Europe/Berlin, or UTC", w.TimeZone)}
		}
		p.loc = loc
	}
	return p, nil
}

// openings calls f with each opening of w from a little more than a week
// before t's local date to a little more than a week after it, in order:
// enough for any window containing t (at most a week long) and for the
// next opening after t (every window opens at least once a week).
func (w window) openings(t time.Time, f func(open time.Time)) {
	local := t.In(w.loc)
	y, m, d := local.Date()
	for off := -8; off <= 8; off++ {
		day := time.Date(y, m, d+off, 12, 0, 0, 0, w.loc) // noon: never in a DST gap
		if !w.days[day.Weekday()] {
			continue
		}
		// time.Date moves a wall-clock time the clock skips forward by
		// the gap (02:30 → 03:30 CEST) and picks one of the two instants
		// of a time the clock passes twice: one opening either way.
		f(time.Date(day.Year(), day.Month(), day.Day(), w.hour, w.minute, 0, 0, w.loc))
	}
}

// WindowState is where t stands relative to a set of windows.
type WindowState struct {
	// Open: one of the windows is open at t.
	Open bool
	// At is, when Open, when the earliest of the windows open at t
	// opened; otherwise the next opening after t.
	At time.Time
	// Window is the index of the window At belongs to.
	Window int
}

// Windows tells whether a rotation may start at t within windows, and if
// not, when the next window opens. An empty list is always open and has
// always been (At is the zero time).
// A window opens on each of its days at start (in its time zone) and stays
// open for its duration, across midnight if need be; the duration is
// elapsed time, so a window on a DST change day lasts as long as on any
// other.
func Windows(ws []v1.RotationWindow, t time.Time) (WindowState, error) {
	if len(ws) == 0 {
		return WindowState{Open: true}, nil
	}
	var open, next WindowState
	for i, raw := range ws {
		w, err := parseWindow(i, raw)
		if err != nil {
			return WindowState{}, err
		}
		w.openings(t, func(o time.Time) {
			switch {
			case !o.After(t) && t.Before(o.Add(w.length)):
				if !open.Open || o.Before(open.At) {
					open = WindowState{Open: true, At: o, Window: i}
				}
			case o.After(t):
				if next.At.IsZero() || o.Before(next.At) {
					next = WindowState{At: o, Window: i}
				}
			}
		})
	}
	if open.Open {
		return open, nil
	}
	return next, nil
}
