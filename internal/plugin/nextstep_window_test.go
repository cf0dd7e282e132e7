package plugin

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// The next step of a schedule held by maintenance windows names when the
// rotation starts, in the window's time zone, and which window it waits
// for.
func TestNextStepScheduleWindows(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC) // a Wednesday
	mt := func(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }
	weekend := v1.RotationWindow{Days: []v1.Weekday{"Sat", "Sun"}, Start: "02:00", Duration: metav1.Duration{Duration: 3 * time.Hour}, TimeZone: "Europe/Berlin"}
	nightly := v1.RotationWindow{Start: "23:30", Duration: metav1.Duration{Duration: 90 * time.Minute}}
	spec := func(ws ...v1.RotationWindow) v1.CredentialSetSpec {
		return v1.CredentialSetSpec{RabbitMQ: &v1.RabbitMQSpec{User: v1.RabbitMQUser{Base: "nova"}},
			Rotation: v1.RotationSpec{Policy: v1.PolicySchedule, Interval: &metav1.Duration{Duration: 720 * time.Hour}, Windows: ws}}
	}
	saturday := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC) // 02:00 CET
	cases := []struct {
		name string
		spec v1.CredentialSetSpec
		st   v1.CredentialSetStatus
		want string
	}{
		{"not due yet", spec(weekend), v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, CurrentSince: mt(now.Add(-time.Hour)), NextRotationAt: mt(saturday)},
			"rotate when needed; next scheduled rotation at 2026-11-28 02:00 CET (in 2d15h; window Sat,Sun 02:00 for 3h Europe/Berlin)"},
		{"due, waiting for the window", spec(weekend), v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, CurrentSince: mt(now.Add(-721 * time.Hour)), NextRotationAt: mt(saturday)},
			"rotate when needed; the scheduled rotation is due and waits for its maintenance window: it starts at 2026-11-28 02:00 CET (in 2d15h; window Sat,Sun 02:00 for 3h Europe/Berlin)"},
		{"the window that opens then, in UTC", spec(weekend, nightly), v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, CurrentSince: mt(now.Add(-721 * time.Hour)), NextRotationAt: mt(time.Date(2026, 11, 25, 23, 30, 0, 0, time.UTC))},
			"rotate when needed; the scheduled rotation is due and waits for its maintenance window: it starts at 2026-11-25 23:30 UTC (in 13h; window daily 23:30 for 90m UTC)"},
		{"due and open: the operator starts it", spec(weekend), v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, CurrentSince: mt(now.Add(-721 * time.Hour)), NextRotationAt: mt(now.Add(-time.Minute))},
			"wait: the scheduled rotation is due; the operator starts it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "nova"}, Spec: c.spec, Status: c.st}
			if got := nextStep(cs, now); got != c.want {
				t.Fatalf("next step\n got %q\nwant %q", got, c.want)
			}
		})
	}
}
