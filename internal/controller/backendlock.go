package controller

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
)

// DefaultMaxConcurrentReconciles is how many sets the manager reconciles
// at once when --max-concurrent-reconciles is not given. Sets that share
// a backend never run at once (BackendLockKeys), so workers only help
// sets on different backends; four keep three of them going while one
// waits up to its per-call deadline on a backend that does not answer, and
// stay within what the API server and the manager's CPU serve on a small
// control plane (each worker at most one set, one backend call per
// instance up to --instance-concurrency).
const DefaultMaxConcurrentReconciles = 4

// lockWakeExpiry: a set woken for a free backend that has not tried it
// within this long no longer holds back the next waiter.
const lockWakeExpiry = 10 * time.Second

// BackendLockKeys names the backend servers a set's reconcile talks to,
// sorted and without duplicates. Two sets with a key in common are never
// reconciled at once, so that concurrent workers change nothing the engine
// relies on: one set at a time on a MySQL instance (a session's lift and
// restore of super_read_only on a replica is not interleaved with
// another's DDL), one on a Ceph cluster (admin key rotation, entity
// generations), one on a broker. Each backend names its own keys
// (registry.Entry.LockKeys), prefixed with its kind so that two backends
// on one host never share one.
//
// Host names are compared as written, case aside: one server reached by
// two names (an IP and a DNS name, a Service and a pod) is not recognised.
// A spec without a backend block has no key.
func BackendLockKeys(cs *v1.CredentialSet) []string {
	e, ok := registry.For(cs)
	if !ok || e.LockKeys == nil {
		return nil
	}
	keys := e.LockKeys(cs)
	slices.Sort(keys)
	return slices.Compact(keys)
}

// backendLocks is the keyed lock over backends. A set takes all of its
// keys or none (so no set holds one while it waits for another, and no
// two sets can deadlock); one that finds a key busy does not hold a
// worker: it is queued behind that key and its reconcile returns. Each
// release wakes the first set queued behind the released key (one, not
// all: a thousand sets on one instance would otherwise all be woken by
// every release), and keeps the key for it until it comes back (or for
// lockWakeExpiry): a set that just released a key and is requeued at once
// by its own status write must not take it again ahead of the sets that
// wait, or one set on a server that does not answer would keep the others
// on it from even trying.
//
// A waiting set is not requeued on a timer as well: every release of a key
// with waiters wakes one, a woken set either takes the key or waits again
// (or, deleted or moved to other servers, passes the wake-up on), and the
// controller's queue runs every set added to it; so no waiter is left
// behind. A timer would be worse than useless: the sets that waited
// together would come back together, most of them to wait again, and a
// thousand sets on one instance would keep the manager busy forever.
type backendLocks struct {
	mu      sync.Mutex
	held    map[string]types.NamespacedName
	waiting map[string][]types.NamespacedName
	// woken: the set woken for a free key, not yet back; while it is on
	// its way the key is kept for it.
	woken map[string]wakeUp
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	now   func() time.Time
	// held is how long a set's backoff still holds it (nil: never): a
	// release does not wake a set before its backoff ends.
	backoff func(types.NamespacedName) time.Duration
}

type wakeUp struct {
	set types.NamespacedName
	at  time.Time
}

// lockTable is the reconciler's keyed lock, made on first use.
func (r *Reconciler) lockTable() *backendLocks {
	r.locksOnce.Do(func() { r.locks = newBackendLocks() })
	return r.locks
}

func newBackendLocks() *backendLocks {
	return &backendLocks{held: map[string]types.NamespacedName{}, waiting: map[string][]types.NamespacedName{},
		woken: map[string]wakeUp{}, now: time.Now}
}

// setQueue gives the lock the controller's queue, to wake waiting sets,
// and what says how long a set's backoff still holds it.
func (l *backendLocks) setQueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], backoff func(types.NamespacedName) time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queue, l.backoff = q, backoff
}

// tryLock takes every key for set, or none; then busy is a key another set
// holds, and set waits behind it.
func (l *backendLocks) tryLock(set types.NamespacedName, keys []string) (busy string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	wokenFor := l.cameBack(set)
	for _, k := range keys {
		if h, taken := l.held[k]; taken && h != set || l.reserved(k) {
			busy = k
			break
		}
	}
	if busy != "" {
		switch {
		case slices.Contains(l.waiting[busy], set):
		case slices.Contains(wokenFor, busy):
			// Woken for it and overtaken: first again.
			l.waiting[busy] = append([]types.NamespacedName{set}, l.waiting[busy]...)
		default:
			l.waiting[busy] = append(l.waiting[busy], set)
		}
		// Keys of this set that are free stay free: whoever waits
		// there is woken (this set may have been woken for one of them).
		for _, k := range keys {
			l.wake(k)
		}
		for _, k := range wokenFor {
			l.wake(k)
		}
		return busy, false
	}
	for _, k := range keys {
		l.held[k] = set
		l.waiting[k] = slices.DeleteFunc(l.waiting[k], func(w types.NamespacedName) bool { return w == set })
		if len(l.waiting[k]) == 0 {
			delete(l.waiting, k)
		}
	}
	// Woken for a key it no longer needs (its spec moved): the next.
	for _, k := range wokenFor {
		l.wake(k)
	}
	return "", true
}

// unlock releases set's keys and wakes the next set waiting on each.
func (l *backendLocks) unlock(set types.NamespacedName, keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if l.held[k] == set {
			delete(l.held, k)
		}
		l.wake(k)
	}
}

// forget drops a set that needs no key any more (deleted, or without a
// backend): it waits nowhere, and a wake-up it got passes on.
func (l *backendLocks) forget(set types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, ws := range l.waiting {
		if ws = slices.DeleteFunc(ws, func(w types.NamespacedName) bool { return w == set }); len(ws) == 0 {
			delete(l.waiting, k)
		} else {
			l.waiting[k] = ws
		}
	}
	for _, k := range l.cameBack(set) {
		l.wake(k)
	}
}

// cameBack clears the wake-ups of set, which is being reconciled now, and
// returns their keys. Caller holds mu.
func (l *backendLocks) cameBack(set types.NamespacedName) []string {
	var keys []string
	for k, w := range l.woken {
		if w.set == set {
			delete(l.woken, k)
			keys = append(keys, k)
		}
	}
	return keys
}

// reserved: a set woken for k is on its way (and has not given up on it
// for lockWakeExpiry); nobody else takes k meanwhile. Caller holds mu.
func (l *backendLocks) reserved(k string) bool {
	w, ok := l.woken[k]
	return ok && l.now().Sub(w.at) < lockWakeExpiry
}

// wake queues the first set waiting for k when k is free and nobody woken
// for it is on the way, and keeps k for it. A waiter its backoff still
// holds is passed over and leaves the line: it comes back on its own when
// the backoff ends, and sets failing on one server must not wake each
// other past their backoff. Caller holds mu.
func (l *backendLocks) wake(k string) {
	if _, taken := l.held[k]; taken || l.reserved(k) {
		return
	}
	var next types.NamespacedName
	for {
		if len(l.waiting[k]) == 0 {
			delete(l.waiting, k)
			return
		}
		next = l.waiting[k][0]
		if l.waiting[k] = l.waiting[k][1:]; len(l.waiting[k]) == 0 {
			delete(l.waiting, k)
		}
		if l.backoff == nil || l.backoff(next) <= 0 {
			break
		}
	}
	l.woken[k] = wakeUp{set: next, at: l.now()}
	if l.queue != nil {
		l.queue.Add(reconcile.Request{NamespacedName: next})
	}
}
