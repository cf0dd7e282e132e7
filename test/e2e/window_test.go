package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// shiftedClock is the manager's clock, moved by the test: a maintenance
// window opens at a wall-clock time, and the test cannot wait hours for one.
type shiftedClock struct{ offset atomic.Int64 }

func (c *shiftedClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// set makes the manager's clock read at from now on.
func (c *shiftedClock) set(at time.Time) { c.offset.Store(int64(time.Until(at))) }

// TestScheduleWindow: on the real API server and a real mysqld, a set with
// policy Schedule whose interval has passed does not rotate while its
// maintenance window is closed, and rotates once it opens — at the opening,
// through the timed requeue alone (no resync is configured). The discard
// and a rotate request outside the window are not held back, and a time
// zone the manager does not know is reported on the set, naming the field.
func TestScheduleWindow(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{NoReplicas: true})
	clock := &shiftedClock{}
	startManager(t, cp.Config, func(r *controller.Reconciler) { r.Now = clock.now })
	ns := newNamespace(t)

	// The window opens two hours from now every day, in UTC, and stays
	// open an hour; the interval is the shortest admission allows.
	opening := time.Now().UTC().Truncate(time.Minute).Add(2 * time.Hour)
	window := v1.RotationWindow{Start: opening.Format("15:04"), Duration: metav1.Duration{Duration: time.Hour}}
	const name = "nightly"
	cs := appUserSet(t, ns, name, c)
	cs.Spec.Rotation = v1.RotationSpec{Policy: v1.PolicySchedule, Interval: &metav1.Duration{Duration: 10 * time.Minute},
		Windows: []v1.RotationWindow{window}}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, name, v1.PhaseIdle, 1)
	keys := map[string]string{strings.ToUpper(name) + "_PASSWORD": name}
	gen1 := userPasswords(sourceData(t, cs), keys, "")
	due := waitNextRotationAt(t, ns, name, opening).Status.CurrentSince.Add(10 * time.Minute)
	id := "schedule-" + strconv.FormatInt(due.Unix(), 10)

	// An hour later the credentials are 50 minutes overdue, and the window
	// is still an hour away. A spec edit that keeps the opening wakes the
	// set; once it has seen the edit, it has decided not to rotate.
	clock.set(opening.Add(-time.Hour))
	setWindowLength(t, ns, name, 61*time.Minute)
	cs = waitNextRotationAt(t, ns, name, opening)
	if st := cs.Status; st.KeyGeneration != 1 || st.RotationID != "" || st.LastRotationID != "" {
		t.Fatalf("due but outside its window, the set rotated: %s", stateOf(cs))
	}

	// Five seconds before the opening the set is woken once more; it
	// rotates when the window opens.
	clock.set(opening.Add(-5 * time.Second))
	setWindowLength(t, ns, name, time.Hour)
	cs = waitPhase(t, ns, name, v1.PhaseDistributed, 1)
	if cs.Status.RotationID != id {
		t.Fatalf("rotation %q, want the scheduled %s", cs.Status.RotationID, id)
	}
	if started := cs.Status.RotationStartedAt; started == nil || started.Time.Before(opening) {
		t.Fatalf("the scheduled rotation started at %v, before its window opened at %s", started, opening)
	}
	mustContain(t, "PolicyTriggered", waitEvent(t, ns, name, string(reason.PolicyTriggered)), "spec.rotation.windows[0] is open")

	// Three hours later the window has closed: the discard goes ahead.
	clock.set(opening.Add(3 * time.Hour))
	discard(t, ns, name, id)
	cs = waitPhase(t, ns, name, v1.PhaseIdle, 2)
	if cs.Status.LastRotationID != id || cs.Status.CurrentSince.Time.Before(opening.Add(time.Hour)) {
		t.Fatalf("after the discard outside the window: %s, current since %s", stateOf(cs), cs.Status.CurrentSince)
	}
	gen2 := userPasswords(sourceData(t, cs), keys, "")
	loginMatrix(t, "after the scheduled rotation", c.Instances(), gen2, gen1)

	// So does a rotation a person asks for.
	rotate(t, ns, name, "by-hand")
	cs = waitPhase(t, ns, name, v1.PhaseDistributed, 2)
	if cs.Status.RotationID != "by-hand" {
		t.Fatalf("rotation %q outside the window, want by-hand", cs.Status.RotationID)
	}
	discard(t, ns, name, "by-hand")
	waitPhase(t, ns, name, v1.PhaseIdle, 3)

	// A time zone shaped like one but unknown passes admission; the set
	// says which field to fix.
	updateSpec(t, ns, name, func(cs *v1.CredentialSet) { cs.Spec.Rotation.Windows[0].TimeZone = "Mars/Olympus_Mons" })
	eventually(t, time.Minute, "InvalidSpec naming the time zone", func() (bool, string) {
		cs := getSet(t, ns, name)
		d := condition(cs, reason.CondDegraded)
		return d != nil && d.Status == metav1.ConditionTrue && d.Reason == string(reason.InvalidSpec) &&
			strings.Contains(d.Message, "spec.rotation.windows[0].timeZone"), condSummary(cs)
	})
	mustContain(t, "InvalidSpec", waitEvent(t, ns, name, string(reason.InvalidSpec)), "spec.rotation.windows[0].timeZone", "Mars/Olympus_Mons")
}

// waitNextRotationAt waits until the set, idle, reports its next scheduled
// rotation at at, for the spec it was last given.
func waitNextRotationAt(t testing.TB, ns, name string, at time.Time) *v1.CredentialSet {
	t.Helper()
	var cs *v1.CredentialSet
	eventually(t, time.Minute, "nextRotationAt "+at.String(), func() (bool, string) {
		cs = getSet(t, ns, name)
		st := cs.Status
		if st.RotationID != "" {
			t.Fatalf("rotation %s started before the window opened at %s: %s", st.RotationID, at, stateOf(cs))
		}
		return st.Phase == v1.PhaseIdle && st.ObservedGeneration == cs.Generation && st.CurrentSince != nil &&
			st.NextRotationAt != nil && st.NextRotationAt.Time.Equal(at), stateOf(cs) + " next " + fmt.Sprint(st.NextRotationAt)
	})
	return cs
}

func setWindowLength(t testing.TB, ns, name string, d time.Duration) {
	t.Helper()
	updateSpec(t, ns, name, func(cs *v1.CredentialSet) { cs.Spec.Rotation.Windows[0].Duration.Duration = d })
}

// TestAdmissionRejectsMalformedWindows: the API server refuses a window it
// cannot read, saying what to fix. The specs are sent as JSON, since a
// typed client cannot even express most of these.
func TestAdmissionRejectsMalformedWindows(t *testing.T) {
	ns := newNamespace(t)
	good := map[string]any{"days": []any{"Sat", "Sun"}, "start": "02:00", "duration": "3h", "timeZone": "Europe/Berlin"}
	with := func(k string, v any) map[string]any {
		w := map[string]any{}
		for key, val := range good {
			w[key] = val
		}
		if v == nil {
			delete(w, k)
		} else {
			w[k] = v
		}
		return w
	}
	schedule := func(ws ...any) map[string]any {
		return map[string]any{"policy": "Schedule", "interval": "720h", "windows": ws}
	}
	nine := make([]any, 9)
	for i := range nine {
		nine[i] = good
	}
	cases := []struct {
		name     string
		rotation map[string]any
		want     string
	}{
		{"hour 24", schedule(with("start", "24:00")), "start is a time of day as HH:MM on a 24-hour clock"},
		{"no leading zero", schedule(with("start", "2:00")), "start is a time of day as HH:MM"},
		{"seconds", schedule(with("start", "02:00:00")), "spec.rotation.windows[0].start"},
		{"no start", schedule(with("start", nil)), "spec.rotation.windows[0].start: Required value"},
		{"unknown day", schedule(with("days", []any{"Monday"})), `supported values: "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"`},
		{"duration 0", schedule(with("duration", "0s")), "duration is how long the window stays open, more than 0 and at most 168h"},
		{"duration over a week", schedule(with("duration", "169h")), "duration is how long the window stays open"},
		{"duration in words", schedule(with("duration", "3 hours")), "duration is how long the window stays open"},
		{"no duration", schedule(with("duration", nil)), "spec.rotation.windows[0].duration: Required value"},
		{"time zone not a name", schedule(with("timeZone", "CET+1 (Berlin)")), "timeZone is an IANA time zone name such as Europe/Berlin"},
		{"too many windows", schedule(nine...), "spec.rotation.windows: Too many"},
		{"windows without Schedule", map[string]any{"policy": "Disabled", "windows": []any{good}}, "windows hold back only the rotations policy Schedule starts"},
	}
	create := func(rotation map[string]any) error {
		cs := &v1.CredentialSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "window-"},
			Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{Hosts: []string{"db-0.example:3306"}},
				Admin:     v1.MySQLAdmin{User: "admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "a", Key: "p"}},
				Users:     []v1.MySQLUser{{Name: "app"}},
			}},
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cs)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if err := unstructured.SetNestedMap(u.Object, rotation, "spec", "rotation"); err != nil {
			t.Fatal(err)
		}
		return k8s.Create(ctxT(t), u)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := create(c.rotation)
			if err == nil {
				t.Fatalf("admitted: %v", c.rotation)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("rejected with %q, want a message containing %q", err, c.want)
			}
		})
	}
	// The well-formed window is admitted (and a short list of them): the
	// cases above fail for their reason only.
	if err := create(schedule(good, with("days", nil))); err != nil {
		t.Fatalf("well-formed windows rejected: %v", err)
	}
}
