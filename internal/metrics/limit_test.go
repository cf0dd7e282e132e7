package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestRosterBounds: the first sets seen get series of their own, up to the
// total and the per-namespace bound; a deleted set frees its place.
func TestRosterBounds(t *testing.T) {
	r := newRoster(3, 2)
	steps := []struct {
		op, ns, name string
		want         bool
	}{
		{"list", "a", "1", true},
		{"list", "a", "2", true},
		{"list", "a", "3", false}, // namespace a is full
		{"list", "b", "1", true},
		{"list", "c", "1", false}, // the total is reached
		{"list", "a", "1", true},  // listed stays listed
		{"forget", "a", "1", true},
		{"list", "c", "1", true}, // the freed place
		{"list", "a", "3", false},
		{"forget", "a", "3", false},
	}
	for i, s := range steps {
		var got bool
		if s.op == "list" {
			got = r.list(s.ns, s.name)
		} else {
			got = r.forget(s.ns, s.name)
		}
		if got != s.want {
			t.Fatalf("step %d: %s %s/%s = %v, want %v", i, s.op, s.ns, s.name, got, s.want)
		}
	}
}

// TestSeriesBounded: however many sets a namespace creates, the registry
// holds series for at most the bound, plus the unlisted sets' sums.
func TestSeriesBounded(t *testing.T) {
	saved := sets
	t.Cleanup(func() { sets = saved })
	sets = newRoster(0, 5)
	st := &v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 1}
	for i := range 50 {
		name := fmt.Sprintf("set-%d", i)
		Observe("flood", name, st)
		Refused("flood", name, "InstanceUnreachable")
		Ended("flood", name, ResultCompleted)
		Stuck("flood", name, i%2 == 0)
		Failures("flood", name, 3)
	}
	t.Cleanup(func() {
		for i := range 50 {
			Forget("flood", fmt.Sprintf("set-%d", i))
		}
	})
	if n := testutil.CollectAndCount(phase); n != 5*len(phases) {
		t.Errorf("rekey_credentialset_phase has %d series, want %d (5 sets)", n, 5*len(phases))
	}
	if got := testutil.ToFloat64(unlisted); got != 45 {
		t.Errorf("rekey_credentialsets_unlisted = %v, want 45", got)
	}
	if got := testutil.ToFloat64(unlistedStuck); got != 22 {
		t.Errorf("rekey_unlisted_rotations_stuck = %v, want 22", got)
	}
	if got := testutil.ToFloat64(refusals.WithLabelValues(Unlisted, Unlisted, "InstanceUnreachable")); got != 45 {
		t.Errorf("the unlisted sets' refusals sum to %v, want 45", got)
	}
	if n := testutil.CollectAndCount(rotations); n > 5*len(results)+1 {
		t.Errorf("rekey_rotations_total has %d series, want at most %d", n, 5*len(results)+1)
	}
	if n := testutil.CollectAndCount(failures); n != 5 {
		t.Errorf("rekey_consecutive_failures has %d series, want 5", n)
	}
}
