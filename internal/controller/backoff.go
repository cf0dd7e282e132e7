package controller

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"rekey.io/rekey/internal/reason"
)

// Unreachable backoff bounds: the first retry of a set whose backend did
// not answer comes after unreachableFirst, each failure in a row doubles
// the wait, up to unreachableMax. A host that is gone for hours then costs
// a login attempt (a worker for up to the dial deadline, a Warning Event)
// every five minutes instead of every ten seconds, and one that answers
// again is seen within the current wait at most.
const (
	unreachableFirst = 10 * time.Second
	unreachableMax   = 5 * time.Minute
)

// unreachableBackoff is the wait after failures (≥ 1) unreachable
// attempts in a row.
func unreachableBackoff(failures int) time.Duration {
	d := unreachableFirst
	for i := 1; i < failures && d < unreachableMax; i++ {
		d *= 2
	}
	return min(d, unreachableMax)
}

// unreachableStreaks counts, per set, the reconciles in a row that found
// its backend unreachable.
type unreachableStreaks struct {
	mu sync.Mutex
	n  map[types.NamespacedName]int
}

// next records one more failure of set and returns how many in a row.
func (s *unreachableStreaks) next(set types.NamespacedName) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[types.NamespacedName]int{}
	}
	s.n[set]++
	return s.n[set]
}

// reset forgets set's streak: its backend answered, or the set is gone.
func (s *unreachableStreaks) reset(set types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.n, set)
}

// backoff applies the unreachable backoff to a reconcile held because an
// instance does not answer (prob is InstanceUnreachable): it returns the
// wait and says it in the problem, which becomes the Degraded condition
// and the Warning Event.
func (r *Reconciler) backoff(set types.NamespacedName, prob *problem) (*problem, time.Duration) {
	n := r.streaks.next(set)
	wait := unreachableBackoff(n)
	msg := fmt.Sprintf("%s; next attempt in %s", prob.message, wait)
	if n > 1 {
		msg = fmt.Sprintf("%s (%d attempts in a row failed; the wait doubles up to %s, and is back to %s once it answers)", msg, n, unreachableMax, unreachableFirst)
	}
	return &problem{prob.reason, msg}, wait
}

// endStreak: any reconcile not held by an unreachable instance ends the
// set's streak. The repair check of a Distributed set (repairPending) is
// not held, and keeps its fixed recheck, so that a rebuilt instance is
// repaired soon after it answers; it leaves the streak as it is.
func (r *Reconciler) endStreak(set types.NamespacedName, prob *problem) {
	if prob == nil || prob.reason != reason.InstanceUnreachable {
		r.streaks.reset(set)
	}
}
