package plugin

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// goal is what --wait follows a request to.
type goal struct {
	what  string // e.g. "rotation X to reach Distributed"
	done  func(*v1.CredentialSet) bool
	fatal []reason.Reason // Warning Events that end the wait with an error
}

// Refusals that mean the operator will not carry out a request as is;
// InstanceUnreachable is absent on purpose: the phase resumes by itself.
// KeyMismatch is the refusal to rotate from a secret changed outside
// rekey; a backend's own refusals that recover repairs refuse a rotation
// too (rotateRefusals).
var (
	discardRefusals = []reason.Reason{reason.DiscardRefused, reason.DiscardSkipped, reason.MissingRotationPending, reason.StaleRotationPending, reason.PendingRejected}
)

// rotateRefusals end a rotation's wait: the shared refusals, and each
// backend's own that recover repairs (registry.Repair).
func rotateRefusals() []reason.Reason {
	out := []reason.Reason{reason.PreflightFailed, reason.RotateRefused, reason.StaleRotationPending, reason.MissingRotationPending, reason.KeyMismatch}
	return append(out, backendRepairs()...)
}

// follow watches the set and its Events until g is done, a refusal appears
// after the request (anything in seen predates it), or timeout passes. It
// prints a line whenever the progress line changes and one per new Event.
// It reads the set and its Events once, so that a goal already reached, a
// refusal already written or a read this user may not make ends the wait
// at once; then it follows both with informers, which list again and
// watch anew by themselves when a watch ends or its version expires.
func (s *session) follow(ctx context.Context, name string, seen baseline, g goal, timeout time.Duration) (*v1.CredentialSet, error) {
	start := s.opts.Now()
	deadline := time.Now().Add(timeout)
	say := func(format string, args ...any) {
		el := s.opts.Now().Sub(start).Truncate(time.Second)
		fmt.Fprintf(s.opts.Out, "[%6s] %s\n", el, fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(s.opts.Out, "waiting up to %s for %s\n", timeout, g.what)
	last := ""
	var cs *v1.CredentialSet
	// A problem no waiting fixes that the set shows only after the wait
	// began ends it, as its Warning does (whichever arrives first): one it
	// showed before may be what the request answers.
	var degradedBefore string
	var gaveUp error
	var notedWait string // the last wait with a deadline noteLateDeadline looked at
	// seenSet reports a new state of the set; true when it is the goal
	// (or gaveUp says why no waiting reaches it).
	seenSet := func(cur *v1.CredentialSet) bool {
		first := cs == nil
		cs = cur
		if key := progressKey(cs); key != last {
			say("%s", progressLine(cs, s.opts.Now()))
			last = key
		}
		if w := cs.Status.Waiting; w != nil && w.Until != nil && string(w.For)+w.Until.String() != notedWait {
			notedWait = string(w.For) + w.Until.String()
			noteLateDeadline(say, cs, deadline, timeout)
		}
		key, r := needsPerson(cs)
		if first {
			degradedBefore = key
		} else if key != "" && key != degradedBefore {
			gaveUp = r
			return true
		}
		return g.done(cs)
	}
	// seenEvents reports new Events; an error is the operator's refusal.
	seenEvents := func(evs []eventsv1.Event) error {
		fresh := seen.fresh(evs)
		seen.add(fresh)
		for _, e := range fresh {
			say("event %s %s: %s", e.Type, e.Reason, e.Note)
		}
		return refused(fresh, g)
	}
	// Calls get a little past the deadline, so that the last read
	// completes and client-go's rate limiter does not fail it early.
	callCtx, cancelCall := context.WithDeadline(ctx, deadline.Add(callGrace))
	defer cancelCall()
	cur, err := s.getSet(callCtx, name)
	var evs []eventsv1.Event
	if err == nil {
		evs, _, err = s.listEventsRV(callCtx, name)
	}
	if err != nil {
		return nil, s.stopped(ctx, err, name, cs, g, timeout, deadline)
	}
	done := seenSet(cur)
	if err := seenEvents(eventsAbout(evs, cur)); err != nil {
		return nil, err
	}
	if done {
		return cs, nil
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	reached, err := s.watchUntil(wctx, cur, seenSet, seenEvents)
	switch {
	case err != nil:
		return nil, err
	case gaveUp != nil:
		return nil, gaveUp
	case reached != nil:
		s.drainEvents(ctx, name, reached, deadline, seenEvents)
		return reached, nil
	}
	if err = ctx.Err(); err == nil {
		err = context.DeadlineExceeded
	}
	return nil, s.stopped(ctx, err, name, cs, g, timeout, deadline)
}

// watchUntil follows the set cs and its Events, handing each change to
// onSet and onEvents (never both at once). It returns the set once onSet
// says it reached the goal, an error for a refusal or a deleted set, and
// nil, nil when ctx ends first.
func (s *session) watchUntil(ctx context.Context, cs *v1.CredentialSet,
	onSet func(*v1.CredentialSet) bool, onEvents func([]eventsv1.Event) error) (*v1.CredentialSet, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	cur := cs
	setDone := make(chan error, 1)
	var reached *v1.CredentialSet
	go func() {
		_, err := watchtools.UntilWithSync(ctx, s.listWatch(&v1.CredentialSetList{}, fields.OneTermEqualSelector("metadata.name", cs.Name)),
			&v1.CredentialSet{}, nil, func(ev watch.Event) (bool, error) {
				if ev.Type == watch.Deleted {
					// Reported as not found, unless a namesake is there already.
					_, err := s.getSet(ctx, cs.Name)
					return false, err
				}
				next, ok := ev.Object.(*v1.CredentialSet)
				if !ok {
					return false, nil
				}
				mu.Lock()
				defer mu.Unlock()
				if cur = next; onSet(next) {
					reached = next
					return true, nil
				}
				return false, nil
			})
		setDone <- err
	}()
	evDone := make(chan error, 1)
	go func() {
		_, err := watchtools.UntilWithSync(ctx, s.listWatch(&eventsv1.EventList{}, eventSelector(cs.Name)),
			&eventsv1.Event{}, nil, func(ev watch.Event) (bool, error) {
				e, ok := ev.Object.(*eventsv1.Event)
				if !ok || ev.Type == watch.Deleted {
					return false, nil
				}
				mu.Lock()
				defer mu.Unlock()
				if !about(e, cur) {
					return false, nil
				}
				return false, onEvents([]eventsv1.Event{*e})
			})
		evDone <- err
	}()
	// The first to end decides; the other is stopped and awaited, so that
	// nothing prints after follow returns.
	var setErr, evErr error
	select {
	case setErr = <-setDone:
		cancel()
		<-evDone
	case evErr = <-evDone:
		cancel()
		setErr = <-setDone
	}
	switch {
	case reached != nil:
		return reached, nil
	case evErr != nil && !wait.Interrupted(evErr):
		return nil, evErr
	case setErr != nil && !wait.Interrupted(setErr):
		return nil, setErr
	}
	return nil, nil
}

// listWatch lists and watches objects of list's kind in the session's
// namespace that sel selects, for an informer.
func (s *session) listWatch(list client.ObjectList, sel fields.Selector) cache.ListerWatcher {
	opts := func(raw *metav1.ListOptions) []client.ListOption {
		return []client.ListOption{client.InNamespace(s.ns), client.MatchingFieldsSelector{Selector: sel}, &client.ListOptions{Raw: raw}}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l := list.DeepCopyObject().(client.ObjectList)
			return l, s.c.List(ctx, l, opts(&o)...)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return s.c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), opts(&o)...)
		},
	}
}

// drainEvents prints the Events recorded before the goal was seen that
// the Event watch had not delivered yet: the set's and the Events' watches
// are separate streams, so a Warning written just before the set moved on
// can arrive after it. The goal is reached, so a refusal among them is
// only reported; a failed read loses nothing but those lines.
func (s *session) drainEvents(ctx context.Context, name string, cs *v1.CredentialSet, deadline time.Time, onEvents func([]eventsv1.Event) error) {
	callCtx, cancel := context.WithDeadline(ctx, deadline.Add(callGrace))
	defer cancel()
	if evs, _, err := s.listEventsRV(callCtx, name); err == nil {
		_ = onEvents(eventsAbout(evs, cs))
	}
}

// callGrace is how far past --timeout one read's API calls may run.
const callGrace = 10 * time.Second

// refused returns the first refusal of g's kind among evs, or a problem
// that no waiting fixes (a refused or under-privileged credential: a person
// must act): the error that ends the wait.
func refused(evs []eventsv1.Event, g goal) error {
	for _, e := range evs {
		if r := reason.Reason(e.Reason); e.Type == "Warning" && (slices.Contains(g.fatal, r) || reason.NeedsPerson(r)) {
			return &refusal{reason: e.Reason, note: e.Note}
		}
	}
	return nil
}

// needsPerson is the set's Degraded condition when its reason is one no
// waiting fixes (reason.NeedsPerson): a key that changes when it is set
// again, and the refusal it ends a wait with; "" and nil otherwise.
func needsPerson(cs *v1.CredentialSet) (string, error) {
	c := meta.FindStatusCondition(cs.Status.Conditions, reason.CondDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || !reason.NeedsPerson(reason.Reason(c.Reason)) {
		return "", nil
	}
	return c.Reason + "\x00" + c.Message + "\x00" + c.LastTransitionTime.String(), &refusal{reason: c.Reason, note: c.Message}
}

// noteLateDeadline says up front when what the set waits for ends only
// after --timeout: the wait would time out with nothing wrong.
func noteLateDeadline(say func(string, ...any), cs *v1.CredentialSet, deadline time.Time, timeout time.Duration) {
	w := cs.Status.Waiting
	if w == nil || w.Until == nil || !w.Until.After(deadline) {
		return
	}
	say("note: the operator waits until %s (%s), after --timeout %s: pass a longer --timeout, or follow it with kubectl rekey status %s -v",
		w.Until.UTC().Format("15:04:05 MST"), w.For, timeout, cs.Name)
}

// refusal is the operator refusing the request, in its own words (its
// messages name the next step).
type refusal struct{ reason, note string }

func (r *refusal) Error() string {
	return fmt.Sprintf("the operator refused (%s): %s", r.reason, r.note)
}

// stopped turns why following ended into an error that says what to do.
func (s *session) stopped(ctx context.Context, err error, name string, cs *v1.CredentialSet, g goal, timeout time.Duration, deadline time.Time) error {
	now := "never read"
	if cs != nil {
		now = progressLine(cs, s.opts.Now())
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("stopped waiting for %s (last seen: %s); the operator goes on: follow it with kubectl rekey status %s -n %s", g.what, now, name, s.ns)
	case !time.Now().Before(deadline):
		return fmt.Errorf("timed out after %s waiting for %s (last seen: %s); nothing was undone and the operator goes on: follow it with kubectl rekey status %s -n %s",
			timeout, g.what, now, name, s.ns)
	}
	return err
}
