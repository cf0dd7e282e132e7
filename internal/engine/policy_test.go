package engine

import (
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestDue(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	gen := func(n int64) *int64 { return &n }
	since := func(ago time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-ago)); return &t }
	day := &metav1.Duration{Duration: 24 * time.Hour}
	idle := func(g int64) v1.CredentialSetStatus {
		return v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: g, KeyVersion: "20.2.4", CurrentSince: since(time.Hour)}
	}
	with := func(st v1.CredentialSetStatus, f func(*v1.CredentialSetStatus)) v1.CredentialSetStatus {
		f(&st)
		return st
	}
	keygen := func(g int64) v1.RotationSpec {
		return v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: gen(g)}
	}
	upgrade := v1.RotationSpec{Policy: v1.PolicyWithVersionUpgrade}
	schedule := v1.RotationSpec{Policy: v1.PolicySchedule, Interval: day}
	dueAt := now.Add(-time.Hour).Add(24 * time.Hour)

	cases := []struct {
		name    string
		rot     v1.RotationSpec
		st      v1.CredentialSetStatus
		version string
		want    string
		nextAt  *time.Time
	}{
		{name: "disabled never rotates", rot: v1.RotationSpec{Policy: v1.PolicyDisabled}, st: idle(1), version: "99.0"},
		{name: "unset policy is disabled", st: idle(1), version: "99.0"},

		{name: "keygen above status rotates", rot: keygen(2), st: idle(1), want: "keygeneration-2"},
		{name: "keygen may jump", rot: keygen(7), st: idle(2), want: "keygeneration-7"},
		{name: "keygen equal to status does not", rot: keygen(2), st: idle(2)},
		{name: "keygen below status does not", rot: keygen(1), st: idle(3)},
		{name: "keygen before provisioning does not", rot: keygen(5), st: idle(0)},
		{name: "keygen while rotating does not start another", rot: keygen(5), st: with(idle(1), func(s *v1.CredentialSetStatus) { s.Phase = v1.PhaseRotating })},
		{name: "keygen while distributed does not", rot: keygen(5), st: with(idle(1), func(s *v1.CredentialSetStatus) { s.Phase = v1.PhaseDistributed })},
		{name: "keygen during a reset does not", rot: keygen(5), st: with(idle(1), func(s *v1.CredentialSetStatus) { s.ResetPending = true })},
		{name: "keygen aborted is not asked again", rot: keygen(5), st: with(idle(1), func(s *v1.CredentialSetStatus) { s.LastRolledBackID = "keygeneration-5" })},
		{name: "keygen raised after an abort rotates", rot: keygen(6), st: with(idle(1), func(s *v1.CredentialSetStatus) { s.LastRolledBackID = "keygeneration-5" }), want: "keygeneration-6"},
		{name: "keygen on a set never phased yet", rot: keygen(2), st: with(idle(1), func(s *v1.CredentialSetStatus) { s.Phase = "" }), want: "keygeneration-2"},

		{name: "upgrade to a newer version rotates", rot: upgrade, st: idle(1), version: "20.2.5", want: "version-20.2.5"},
		{name: "upgrade compares numerically", rot: upgrade, st: with(idle(1), func(s *v1.CredentialSetStatus) { s.KeyVersion = "9.9.0" }), version: "9.10.0", want: "version-9.10.0"},
		{name: "same version does not", rot: upgrade, st: idle(1), version: "20.2.4"},
		{name: "downgrade does not", rot: upgrade, st: idle(1), version: "20.2.3"},
		{name: "unknown running version does not", rot: upgrade, st: idle(1), version: ""},
		{name: "unknown minting version (brownfield) rotates", rot: upgrade, st: with(idle(1), func(s *v1.CredentialSetStatus) { s.KeyVersion = "" }), version: "20.2.4", want: "version-20.2.4"},
		{name: "upgrade aborted is not asked again", rot: upgrade, st: with(idle(1), func(s *v1.CredentialSetStatus) { s.LastRolledBackID = "version-20.2.5" }), version: "20.2.5"},
		{name: "upgrade just completed is not asked again", rot: upgrade, st: with(idle(2), func(s *v1.CredentialSetStatus) { s.LastRotationID = "version-20.2.5"; s.KeyVersion = "20.2.4" }), version: "20.2.5"},
		{name: "upgrade while rotating does not", rot: upgrade, st: with(idle(1), func(s *v1.CredentialSetStatus) { s.Phase = v1.PhaseRotating }), version: "21.0.0"},

		{name: "schedule not yet due", rot: schedule, st: idle(1), nextAt: &dueAt},
		{name: "schedule due", rot: schedule, st: with(idle(1), func(s *v1.CredentialSetStatus) { s.CurrentSince = since(25 * time.Hour) }),
			want: "schedule-" + itoa(now.Add(-25*time.Hour).Add(24*time.Hour).Unix()), nextAt: ptr(now.Add(-time.Hour))},
		{name: "schedule exactly due", rot: schedule, st: with(idle(1), func(s *v1.CredentialSetStatus) { s.CurrentSince = since(24 * time.Hour) }),
			want: "schedule-" + itoa(now.Unix()), nextAt: ptr(now)},
		{name: "schedule aborted waits one more interval", rot: schedule,
			st: with(idle(1), func(s *v1.CredentialSetStatus) {
				s.CurrentSince = since(25 * time.Hour)
				s.LastRolledBackID = "schedule-" + itoa(now.Add(-time.Hour).Unix())
			}),
			nextAt: ptr(now.Add(23 * time.Hour))},
		{name: "schedule without currentSince does not", rot: schedule, st: with(idle(1), func(s *v1.CredentialSetStatus) { s.CurrentSince = nil })},
		{name: "schedule due while distributed does not start another", rot: schedule,
			st:     with(idle(1), func(s *v1.CredentialSetStatus) { s.CurrentSince = since(48 * time.Hour); s.Phase = v1.PhaseDistributed }),
			nextAt: ptr(now.Add(-24 * time.Hour))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Due(PolicyInput{Rotation: c.rot, Status: c.st, Version: c.version, Now: now})
			if got.RotationID != c.want {
				t.Fatalf("RotationID = %q, want %q (why %q)", got.RotationID, c.want, got.Why)
			}
			if (got.RotationID != "") != (got.Why != "") {
				t.Fatalf("Why = %q for RotationID %q: a triggered rotation must say why, and only then", got.Why, got.RotationID)
			}
			switch {
			case c.nextAt == nil && got.NextAt != nil:
				t.Fatalf("NextAt = %v, want none", got.NextAt)
			case c.nextAt != nil && (got.NextAt == nil || !got.NextAt.Equal(*c.nextAt)):
				t.Fatalf("NextAt = %v, want %v", got.NextAt, c.nextAt)
			}
		})
	}
}

func TestTargetGeneration(t *testing.T) {
	g := func(n int64) *int64 { return &n }
	keygen := func(n int64) v1.RotationSpec {
		return v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: g(n)}
	}
	st := func(phase v1.RotationPhase, cur, target int64) v1.CredentialSetStatus {
		return v1.CredentialSetStatus{Phase: phase, KeyGeneration: cur, TargetGeneration: target}
	}
	cases := []struct {
		name string
		rot  v1.RotationSpec
		st   v1.CredentialSetStatus
		want int64
	}{
		{"idle: the next one", v1.RotationSpec{}, st(v1.PhaseIdle, 1, 0), 2},
		{"never phased counts as idle", v1.RotationSpec{}, st("", 3, 0), 4},
		{"keyGeneration may jump ahead", keygen(9), st(v1.PhaseIdle, 1, 0), 9},
		{"keyGeneration below the next is ignored", keygen(2), st(v1.PhaseIdle, 4, 0), 5},
		{"keyGeneration without its policy is ignored", v1.RotationSpec{Policy: v1.PolicySchedule, KeyGeneration: g(9)}, st(v1.PhaseIdle, 1, 0), 2},
		{"a leftover target while idle is ignored", v1.RotationSpec{}, st(v1.PhaseIdle, 2, 8), 3},
		{"unprovisioned: provisioned at 1 first", v1.RotationSpec{}, st("", 0, 0), 2},
		{"unprovisioned: provisioned at keyGeneration first", keygen(5), st("", 0, 0), 6},
		{"rotating: the recorded target", v1.RotationSpec{}, st(v1.PhaseRotating, 2, 7), 7},
		{"distributed: the recorded target, not the edited spec", keygen(12), st(v1.PhaseDistributed, 2, 7), 7},
		{"active, status without a target: the next one", keygen(12), st(v1.PhaseDistributed, 2, 0), 3},
		{"active, target not above current: the next one", v1.RotationSpec{}, st(v1.PhaseRotating, 4, 4), 5},
	}
	for _, c := range cases {
		if got := TargetGeneration(c.rot, c.st); got != c.want {
			t.Errorf("%s: TargetGeneration = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestInitialGeneration(t *testing.T) {
	g := func(n int64) *int64 { return &n }
	cases := []struct {
		name string
		rot  v1.RotationSpec
		want int64
	}{
		{"no policy", v1.RotationSpec{}, 1},
		{"keyGeneration 1", v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: g(1)}, 1},
		{"keyGeneration 3 is taken at creation", v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: g(3)}, 3},
		{"keyGeneration without its policy is ignored", v1.RotationSpec{Policy: v1.PolicySchedule, KeyGeneration: g(3)}, 1},
		{"policy without keyGeneration", v1.RotationSpec{Policy: v1.PolicyKeyGeneration}, 1},
		{"nonsense below 1", v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: g(-4)}, 1},
	}
	for _, c := range cases {
		if got := InitialGeneration(c.rot); got != c.want {
			t.Errorf("%s: InitialGeneration = %d, want %d", c.name, got, c.want)
		}
	}
}

// A set provisioned with keyGeneration N is not rotated right away when
// rekey minted its keys, and is when it adopted older ones.
func TestStartGeneration(t *testing.T) {
	cases := []struct {
		name           string
		initial, found int64
		adopted        bool
		want           int64
		due            bool // the policy rotates right after provisioning
	}{
		{"minted, no keyGeneration", 1, 0, false, 1, false},
		{"minted at the spec's keyGeneration", 3, 0, false, 3, false},
		{"minted by an earlier attempt at 3, spec still 3", 3, 3, false, 3, false},
		{"minted by an earlier attempt at 3, spec lowered to 2", 2, 3, false, 3, false},
		{"adopted bare name (generation 0)", 3, 0, true, 0, true},
		{"adopted bare name, keyGeneration 1", 1, 0, true, 0, false},
		{"adopted generation 2 below keyGeneration 3", 3, 2, true, 2, true},
		{"adopted generation 5 above keyGeneration 3", 3, 5, true, 5, false},
	}
	for _, c := range cases {
		got := StartGeneration(c.initial, c.adopted, c.found)
		if got != c.want {
			t.Errorf("%s: StartGeneration = %d, want %d", c.name, got, c.want)
		}
		// What status.keyGeneration becomes (provision takes max(·, 1)),
		// and whether the policy then rotates.
		st := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: max(got, 1)}
		rot := v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: &c.initial}
		due := Due(PolicyInput{Rotation: rot, Status: st}).RotationID != ""
		if due != c.due {
			t.Errorf("%s: policy due right after provisioning = %v, want %v", c.name, due, c.due)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"20.2.4", "20.2.4", 0}, {"20.2.4", "20.2.5", -1}, {"9.10.0", "9.9.9", 1},
		{"21.0.0", "20.99.99", 1}, {"3.10.8", "3.10", 1}, {"8.0.36", "8.4.0", -1},
	}
	for _, c := range cases {
		if got := CompareVersions(c.a, c.b); got != c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := CompareVersions(c.b, c.a); got != -c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d (antisymmetry)", c.b, c.a, got, -c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
