package e2e

import (
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// managerGracePeriod is the test manager's --default-grace-period.
const managerGracePeriod = 2 * time.Second

// waitsSeen records every status.waiting the manager writes for one set,
// with the status it came with.
type waitsSeen struct {
	mu   sync.Mutex
	seen []v1.CredentialSetStatus
}

func watchWaits(t *testing.T, ns, name string) *waitsSeen {
	t.Helper()
	wc, err := client.NewWithWatch(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctxT(t), &v1.CredentialSetList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	s := &waitsSeen{}
	go func() {
		for ev := range w.ResultChan() {
			if cs, ok := ev.Object.(*v1.CredentialSet); ok && ev.Type == watch.Modified && cs.Name == name && cs.Status.Waiting != nil {
				s.mu.Lock()
				s.seen = append(s.seen, *cs.Status.DeepCopy())
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// assertResetWait: after an abort, the manager named the reset's wait,
// ResetGracePeriod, with its deadline gracePeriod after the rollback's
// rollout (status.rolledOutAt, whole seconds: at most 1 s later when it
// decided in the reconcile that recorded the rollout).
func (s *waitsSeen) assertResetWait(t *testing.T, grace time.Duration) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var fors []v1.WaitFor
	for _, st := range s.seen {
		fors = append(fors, st.Waiting.For)
		if st.Waiting.For != v1.WaitResetGracePeriod {
			continue
		}
		if !st.ResetPending || st.Waiting.Until == nil || st.RolledOutAt == nil {
			t.Fatalf("ResetGracePeriod without resetPending, until or rolledOutAt: %+v", st)
		}
		if d := st.Waiting.Until.Sub(st.RolledOutAt.Time); d < grace || d > grace+time.Second {
			t.Fatalf("the reset's deadline %s is %s after the rollback's rollout (%s), want gracePeriod %s", st.Waiting.Until, d, st.RolledOutAt, grace)
		}
		observed(t, "status.waiting named the reset's wait: ResetGracePeriod until %s (rolled back at %s); waits seen %v",
			st.Waiting.Until.UTC().Format(time.TimeOnly), st.RolledOutAt.UTC().Format(time.TimeOnly), fors)
		return
	}
	// The wait is written only by a reconcile that runs inside the grace
	// period (the test manager's is 2 s): on a loaded machine the reconcile
	// after the rollback's rollout may come when it has passed, and the
	// reset runs at once. Its deadline is then checked by the engine's
	// table test (TestWaiting); here the waits seen are reported.
	observed(t, "no status write fell inside the reset's %s grace period (a loaded machine); waits seen: %v", grace, fors)
}
