package demo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// tracker follows the set's phase, naming the idle periods before and
// after the rotation apart, and times each phase.
type tracker struct {
	k8s client.Client

	mu      sync.Mutex
	current string
	since   time.Time
	spans   []string
	rotated bool
}

func (t *tracker) phase() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current == "" {
		return "Idle"
	}
	return t.current
}

func (t *tracker) run(ctx context.Context) {
	for ctx.Err() == nil {
		cs := &v1.CredentialSet{}
		if err := t.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: setName}, cs); err == nil {
			t.observe(cs.Status.Phase)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (t *tracker) observe(p v1.RotationPhase) {
	t.mu.Lock()
	defer t.mu.Unlock()
	name := string(p)
	switch {
	case (p == v1.PhaseIdle || p == v1.PhasePending) && !t.rotated:
		name = "Idle-before"
	case p == v1.PhaseIdle:
		name = "Idle-after"
	default:
		t.rotated = true
	}
	if name == t.current {
		return
	}
	now := time.Now()
	if t.current == "Rotating" || t.current == "Distributed" {
		t.spans = append(t.spans, fmt.Sprintf("%s took %s", t.current, now.Sub(t.since).Round(10*time.Millisecond)))
	}
	t.current, t.since = name, now
}

func (t *tracker) durations() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.spans...)
}
