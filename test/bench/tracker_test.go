package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// tracker watches CredentialSets (an informer in the benchmark's process,
// with its own connection) and timestamps the moment each awaited state is
// delivered, so that wall times are taken without polling the API server.
type tracker struct {
	mu      sync.Mutex
	latest  map[types.NamespacedName]*v1.CredentialSet
	waiters map[types.NamespacedName][]waiter
}

type waiter struct {
	cond func(*v1.CredentialSet) bool
	ch   chan time.Time
}

func newTracker(b *testing.B, cfg *rest.Config, selector map[string]string) *tracker {
	b.Helper()
	t := &tracker{latest: map[types.NamespacedName]*v1.CredentialSet{}, waiters: map[types.NamespacedName][]waiter{}}
	c, err := cache.New(rest.CopyConfig(cfg), cache.Options{Scheme: scheme,
		ByObject: map[client.Object]cache.ByObject{&v1.CredentialSet{}: {Label: labels.SelectorFromSet(selector)}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.Cleanup(func() { cancel(); <-done })
	inf, err := c.GetInformer(ctx, &v1.CredentialSet{})
	if err != nil {
		b.Fatal(err)
	}
	on := func(o any) {
		if cs, ok := o.(*v1.CredentialSet); ok {
			t.observe(cs, time.Now())
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: on, UpdateFunc: func(_, o any) { on(o) },
	}); err != nil {
		b.Fatal(err)
	}
	go func() { defer close(done); _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("tracker cache did not sync")
	}
	return t
}

func (t *tracker) observe(cs *v1.CredentialSet, at time.Time) {
	key := types.NamespacedName{Namespace: cs.Namespace, Name: cs.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.latest[key] = cs
	ws := t.waiters[key]
	keep := ws[:0]
	for _, w := range ws {
		if w.cond(cs) {
			w.ch <- at
		} else {
			keep = append(keep, w)
		}
	}
	if len(keep) == 0 {
		delete(t.waiters, key)
	} else {
		t.waiters[key] = keep
	}
}

// await returns a channel that receives the time the set is first seen in
// a state satisfying cond (at once if it already is). Register it before
// the change that leads there.
func (t *tracker) await(ns, name string, cond func(*v1.CredentialSet) bool) <-chan time.Time {
	key := types.NamespacedName{Namespace: ns, Name: name}
	ch := make(chan time.Time, 1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if cs := t.latest[key]; cs != nil && cond(cs) {
		ch <- time.Now()
		return ch
	}
	t.waiters[key] = append(t.waiters[key], waiter{cond, ch})
	return ch
}

func (t *tracker) get(ns, name string) *v1.CredentialSet {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.latest[types.NamespacedName{Namespace: ns, Name: name}]
}

// wait receives from an await channel or fails the benchmark with the
// set's last known state.
func (t *tracker) wait(b *testing.B, ch <-chan time.Time, timeout time.Duration, ns, name, what string) time.Time {
	b.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(timeout):
		b.Fatalf("%s/%s: no %s after %s (%s)", ns, name, what, timeout, stateOf(t.get(ns, name)))
		return time.Time{}
	}
}
