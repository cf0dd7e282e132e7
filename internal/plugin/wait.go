package plugin

import (
	"context"
	"fmt"
	"slices"
	"time"

	eventsv1 "k8s.io/api/events/v1"

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

// follow polls the set and its Events until g is done, a refusal appears
// after the request (anything in seen predates it), or timeout passes. It
// prints a line whenever the progress line changes and one per new Event.
// Polling rather than watching keeps it simple and immune to dropped
// watches; once a second is plenty for steps that take seconds to minutes.
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
	for {
		// Calls get a little past the deadline, so that the last poll
		// completes and client-go's rate limiter does not fail it early.
		callCtx, cancel := context.WithDeadline(ctx, deadline.Add(callGrace))
		cur, err := s.getSet(callCtx, name)
		var fresh []eventsv1.Event
		if err == nil {
			cs = cur
			fresh, err = s.freshEvents(callCtx, cs, seen)
		}
		cancel()
		if err != nil {
			return nil, s.stopped(ctx, err, name, cs, g, timeout, deadline)
		}
		if line := progressLine(cs); line != last {
			say("%s", line)
			last = line
		}
		for _, e := range fresh {
			say("event %s %s: %s", e.Type, e.Reason, e.Note)
		}
		if err := refused(fresh, g); err != nil {
			return nil, err
		}
		if g.done(cs) {
			return cs, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, s.stopped(ctx, context.DeadlineExceeded, name, cs, g, timeout, deadline)
		}
		select {
		case <-ctx.Done():
			return nil, s.stopped(ctx, ctx.Err(), name, cs, g, timeout, deadline)
		case <-time.After(min(s.opts.PollInterval, left)):
		}
	}
}

// callGrace is how far past --timeout one poll's API calls may run.
const callGrace = 10 * time.Second

// freshEvents returns the Events about cs new since seen, and adds them.
func (s *session) freshEvents(ctx context.Context, cs *v1.CredentialSet, seen baseline) ([]eventsv1.Event, error) {
	all, err := s.listEvents(ctx, cs.Name)
	if err != nil {
		return nil, err
	}
	fresh := seen.fresh(eventsAbout(all, cs))
	seen.add(fresh)
	return fresh, nil
}

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
