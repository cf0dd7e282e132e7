package controller

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// Backoff bounds of a failing set: the first retry comes after
// backoffFirst, each failure in a row doubles the wait, up to backoffMax.
// A backend that is gone for hours then costs one attempt (a worker for up
// to the dial deadline, one Warning folded into the Event's series) every
// five minutes, and one that answers again within seconds is seen soon.
const (
	backoffFirst = time.Second
	backoffMax   = 5 * time.Minute
)

// retryNote is what a problem retried with backoff says about it. It is
// the same on every attempt: a message that changed with the count or the
// wait would make each failure write the status anew.
var retryNote = fmt.Sprintf("rekey retries with a backoff that doubles from %s up to %s", backoffFirst, backoffMax)

// retries holds failing sets back: a set whose reconcile failed is not
// tried again before its backoff ends, whatever wakes it (a consumer's
// rollout, a Secret event, another set releasing the backend), unless a
// person asked for something new: its spec, annotations (a trigger such as
// rekey.io/rotate) or labels changed, or it is being deleted. The waits
// come from client-go's per-item exponential limiter, the one
// controller-runtime's queue uses.
type retries struct {
	once    sync.Once
	limiter workqueue.TypedRateLimiter[types.NamespacedName]

	mu   sync.Mutex
	held map[types.NamespacedName]hold
}

// hold is one failing set's backoff: no attempt before until, unless the
// set no longer looks as it did when it failed (by).
type hold struct {
	until time.Time
	by    wakeKey
}

// wakeKey is what a person changes to ask for a fresh attempt at once.
type wakeKey struct {
	generation  int64
	annotations string
	labels      string
	deleting    bool
}

func wakeKeyOf(cs *v1.CredentialSet) wakeKey {
	return wakeKey{generation: cs.Generation, annotations: flat(cs.Annotations), labels: flat(cs.Labels),
		deleting: !cs.DeletionTimestamp.IsZero()}
}

// flat is a map as one comparable string (keys sorted).
func flat(m map[string]string) string {
	s := ""
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s += fmt.Sprintf("%q=%q;", k, m[k])
	}
	return s
}

// holdLeft decides whether a set woken at now is still held by its
// backoff: left > 0 is how long it is; fresh means the hold no longer
// applies because a person changed the set since it failed (its backoff
// starts over).
func holdLeft(h hold, ok bool, now wakeKey, at time.Time) (left time.Duration, fresh bool) {
	if !ok {
		return 0, false
	}
	if h.by != now {
		return 0, true
	}
	if at.Before(h.until) {
		return h.until.Sub(at), false
	}
	return 0, false
}

func (r *retries) init() {
	r.once.Do(func() {
		r.limiter = workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](backoffFirst, backoffMax)
		r.held = map[types.NamespacedName]hold{}
	})
}

// holding is how long set, as cs shows it now, is still held (0: try it).
func (r *retries) holding(set types.NamespacedName, cs *v1.CredentialSet, now time.Time) time.Duration {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.held[set]
	left, fresh := holdLeft(h, ok, wakeKeyOf(cs), now)
	if fresh {
		delete(r.held, set)
		r.limiter.Forget(set)
	}
	return left
}

// left is how long set is held, whatever it looks like now (0: not held).
func (r *retries) left(set types.NamespacedName, now time.Time) time.Duration {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.held[set]; ok && now.Before(h.until) {
		return h.until.Sub(now)
	}
	return 0
}

// fail records one more failure of set (cs as this reconcile read it) and
// returns the wait before the next attempt and the failures in a row.
func (r *retries) fail(set types.NamespacedName, cs *v1.CredentialSet, now time.Time) (time.Duration, int) {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	wait := r.limiter.When(set)
	r.held[set] = hold{until: now.Add(wait), by: wakeKeyOf(cs)}
	return wait, r.limiter.NumRequeues(set)
}

// reset forgets set's failures: it got through, or is gone.
func (r *retries) reset(set types.NamespacedName) {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.held, set)
	r.limiter.Forget(set)
}

// outcome is how a reconcile's result is retried.
type outcome int

const (
	// untried: the reconcile ended before it tried anything (it waits
	// for its backend's lock, or the set is being deleted); the backoff
	// is left as it is.
	untried outcome = iota
	// succeeded: no problem; the backoff starts over.
	succeeded
	// failed: retried with the set's backoff, held against wake-ups.
	failed
	// waiting: a problem with a recheck of its own (a rollout wait, the
	// health gate's poll, a refusal re-checked on a fixed period); the
	// backoff is left as it is.
	waiting
	// refused: the backend refused rekey's credential
	// (AuthenticationFailed); held until a person changes the set.
	refused
)

// personHold is how long a set whose credential the backend refused is
// held: in effect until a person changes the set (or the manager
// restarts). A retry with the same credential cannot succeed, and each
// one is a refused login that a server with a failed-login limit
// (MySQL's FAILED_LOGIN_ATTEMPTS) counts toward locking the account, or
// that keeps it locked: so the number of such logins is bounded by the
// changes people make, not by time.
const personHold = 365 * 24 * time.Hour

// refusedNote is what an AuthenticationFailed problem adds: how to have
// rekey try again once the credential is fixed.
const refusedNote = "rekey does not log in with it again until the CredentialSet changes: once the credential is fixed, edit or annotate the set (e.g. kubectl annotate credentialset <name> rekey.io/retry=1 --overwrite)"

// holdForPerson holds set (cs as this reconcile read it) until it changes
// (see personHold) and returns the hold.
func (r *retries) holdForPerson(set types.NamespacedName, cs *v1.CredentialSet, now time.Time) time.Duration {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held[set] = hold{until: now.Add(personHold), by: wakeKeyOf(cs)}
	return personHold
}

// outcomeOf classifies a reconcile: an error (classified as a problem or
// not) is a failure, except the health gate, which polls so that the
// phase resumes soon after the cluster is healthy again; a problem that
// comes with no recheck of its own is a failure too (nothing else would
// bring it back but a wake-up); other problems wait on their own timer.
func outcomeOf(fromErr bool, prob *problem, requeue time.Duration) outcome {
	switch {
	case prob == nil && !fromErr:
		return succeeded
	case fromErr && prob != nil && (prob.reason == reason.AuthenticationFailed || prob.reason == reason.PreflightFailed):
		// A failed preflight is held the same way: the checks would fail
		// again until a person fixes what they name and asks again.
		return refused
	case prob != nil && prob.reason == reason.ClusterUnhealthy:
		return waiting
	case fromErr:
		return failed
	case requeue == 0:
		return failed
	}
	return waiting
}
