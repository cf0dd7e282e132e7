package controller

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"rekey.io/rekey/internal/reason"
)

func TestUnreachableBackoff(t *testing.T) {
	for _, tt := range []struct {
		failures int
		want     time.Duration
	}{
		{0, 10 * time.Second}, // never called so, but never shorter
		{1, 10 * time.Second},
		{2, 20 * time.Second},
		{3, 40 * time.Second},
		{4, 80 * time.Second},
		{5, 160 * time.Second},
		{6, 5 * time.Minute}, // 320 s, bounded
		{7, 5 * time.Minute},
		{1000, 5 * time.Minute},
	} {
		if got := unreachableBackoff(tt.failures); got != tt.want {
			t.Errorf("unreachableBackoff(%d) = %s, want %s", tt.failures, got, tt.want)
		}
	}
}

// TestBackoffStreak: the wait grows with unreachable reconciles in a row,
// is said in the problem's message, and starts over after any other
// outcome; sets keep streaks of their own.
func TestBackoffStreak(t *testing.T) {
	r := &Reconciler{}
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	down := &problem{reason.InstanceUnreachable, "instance db-0:3306 is unreachable"}
	var msgs []string
	for _, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
		p, wait := r.backoff(a, down)
		if wait != want {
			t.Fatalf("wait %s, want %s", wait, want)
		}
		r.endStreak(a, p)
		msgs = append(msgs, p.message)
	}
	if !strings.HasSuffix(msgs[0], "; next attempt in 10s") || !strings.Contains(msgs[2], "next attempt in 40s (3 attempts in a row failed") {
		t.Errorf("messages do not say the wait: %q", msgs)
	}
	if _, wait := r.backoff(b, down); wait != 10*time.Second {
		t.Errorf("another set's first failure waits %s, want 10s", wait)
	}
	r.endStreak(a, nil) // the backend answered
	if _, wait := r.backoff(a, down); wait != 10*time.Second {
		t.Errorf("after a success the wait is %s, want 10s again", wait)
	}
	r.endStreak(a, &problem{reason.KeyMismatch, "refused"})
	if _, wait := r.backoff(a, down); wait != 10*time.Second {
		t.Errorf("after another problem the wait is %s, want 10s again", wait)
	}
	if down.message != "instance db-0:3306 is unreachable" {
		t.Errorf("the classified problem was changed in place: %q", down.message)
	}
}
