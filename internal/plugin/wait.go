package plugin

import (
	"context"
	"fmt"
	"slices"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
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
// KeyMismatch is Ceph's and RabbitMQ's refusal to rotate from a secret
// changed outside rekey.
var (
	rotateRefusals  = []reason.Reason{reason.DualPasswordExists, reason.RotateRefused, reason.StaleRotationPending, reason.MissingRotationPending, reason.KeyMismatch}
	discardRefusals = []reason.Reason{reason.DiscardRefused, reason.DiscardSkipped, reason.MissingRotationPending, reason.StaleRotationPending, reason.PendingRejected}
)

// follow watches the set and its Events until g is done, a refusal appears
// after the request (anything in seen predates it), or timeout passes. It
// prints a line whenever the progress line changes and one per new Event.
// It reads the set and its Events once, then watches both from those
// resourceVersions, so it wakes on every change and misses none; when a
// watch ends (the server closes watches after a while, or the version
// expired) it reads both again and watches anew.
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
	// seenSet reports a new state of the set; true when it is the goal.
	seenSet := func(cur *v1.CredentialSet) bool {
		cs = cur
		if line := progressLine(cs); line != last {
			say("%s", line)
			last = line
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
	// Watches end at the deadline; calls get a little past it, so that the
	// last read completes and client-go's rate limiter does not fail it early.
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		callCtx, cancelCall := context.WithDeadline(ctx, deadline.Add(callGrace))
		cur, err := s.getSet(callCtx, name)
		var evs []eventsv1.Event
		var evRV string
		if err == nil {
			evs, evRV, err = s.listEventsRV(callCtx, name)
		}
		cancelCall()
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
		if time.Until(deadline) <= 0 {
			return nil, s.stopped(ctx, context.DeadlineExceeded, name, cs, g, timeout, deadline)
		}
		reached, err := s.watchUntil(wctx, name, cur.ResourceVersion, evRV, seenSet, seenEvents)
		switch {
		case err != nil && wctx.Err() == nil:
			return nil, err
		case reached != nil:
			s.drainEvents(ctx, name, reached, deadline, seenEvents)
			return reached, nil
		case wctx.Err() != nil:
			err := ctx.Err()
			if err == nil {
				err = context.DeadlineExceeded
			}
			return nil, s.stopped(ctx, err, name, cs, g, timeout, deadline)
		}
		// A watch ended: read again and watch anew.
	}
}

// watchUntil watches the set name from setRV and its Events from evRV,
// handing each change to onSet and onEvents. It returns the set once onSet
// says it reached the goal, an error for a refusal or a failed watch, and
// nil, nil when a watch ended and must be restarted from a fresh read (or
// ctx ended).
func (s *session) watchUntil(ctx context.Context, name, setRV, evRV string,
	onSet func(*v1.CredentialSet) bool, onEvents func([]eventsv1.Event) error) (*v1.CredentialSet, error) {
	setW, err := s.c.Watch(ctx, &v1.CredentialSetList{}, client.InNamespace(s.ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: setRV}},
		client.MatchingFields{"metadata.name": name})
	if err != nil {
		return nil, fmt.Errorf("watch credentialset %s/%s: %w", s.ns, name, err)
	}
	defer setW.Stop()
	evW, err := s.c.Watch(ctx, &eventsv1.EventList{}, client.InNamespace(s.ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: evRV}},
		client.MatchingFieldsSelector{Selector: eventSelector(name)})
	if err != nil {
		return nil, fmt.Errorf("watch events in %s: %w", s.ns, err)
	}
	defer evW.Stop()
	var cur *v1.CredentialSet
	for {
		select {
		case <-ctx.Done():
			return nil, nil
		case ev, ok := <-setW.ResultChan():
			if !ok || ev.Type == watch.Error || ev.Type == watch.Deleted {
				return nil, nil // read again: a deleted set is reported as not found
			}
			next, isSet := ev.Object.(*v1.CredentialSet)
			if !isSet || ev.Type == watch.Bookmark {
				continue
			}
			cur = next
			if onSet(cur) {
				return cur, nil
			}
		case ev, ok := <-evW.ResultChan():
			if !ok || ev.Type == watch.Error {
				return nil, nil
			}
			e, isEvent := ev.Object.(*eventsv1.Event)
			if !isEvent || ev.Type == watch.Bookmark || ev.Type == watch.Deleted {
				continue
			}
			if cur != nil && !about(e, cur) {
				continue
			}
			if err := onEvents([]eventsv1.Event{*e}); err != nil {
				return nil, err
			}
		}
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

// refused returns the first refusal of g's kind among evs: the error that
// ends the wait.
func refused(evs []eventsv1.Event, g goal) error {
	for _, e := range evs {
		if e.Type == "Warning" && slices.Contains(g.fatal, reason.Reason(e.Reason)) {
			return &refusal{reason: e.Reason, note: e.Note}
		}
	}
	return nil
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
		now = progressLine(cs)
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
