// Package leader fences backend writes against a manager that is no longer
// the leader. controller-runtime's leader election does not stop a
// reconcile in flight: a leader that stalls past its lease (a long GC
// pause, a frozen VM) goes on, when it wakes, with what it read before,
// until its elector notices the loss and the process exits. A Fence, asked
// right before each backend write, refuses it once the Lease names
// another holder or has expired, narrowing that window to the time
// between the check and the write.
package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotLeader is what Check returns once this process lost the Lease.
var ErrNotLeader = errors.New("not the leader")

// Fence checks that this process still holds the leader Lease.
type Fence struct {
	reader client.Reader
	key    client.ObjectKey
	now    func() time.Time

	once  sync.Once
	known chan struct{}
	id    string
	term  int64
}

// NewFence fences on the Lease namespace/name, read live through reader.
func NewFence(reader client.Reader, namespace, name string) *Fence {
	return &Fence{reader: reader, key: client.ObjectKey{Namespace: namespace, Name: name},
		now: time.Now, known: make(chan struct{})}
}

// Elected records the holder the Lease names now as this process: call it
// once this process won the election (the manager's Elected channel
// closed). Checks wait for it.
func (f *Fence) Elected(ctx context.Context) error {
	l, err := f.lease(ctx)
	if err != nil {
		return err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return fmt.Errorf("leader Lease %s names no holder right after the election", f.key)
	}
	if l.Spec.AcquireTime == nil {
		return fmt.Errorf("leader Lease %s has no acquire time right after the election", f.key)
	}
	f.once.Do(func() { f.id, f.term = *l.Spec.HolderIdentity, TermOf(l); close(f.known) })
	return nil
}

// Term is this process's leadership term (see TermOf), 0 until Elected.
func (f *Fence) Term() int64 {
	select {
	case <-f.known:
		return f.term
	default:
		return 0
	}
}

// TermOf is the term of the Lease's current holding: when it was acquired,
// in microseconds since the epoch. A backend keeps the highest term that
// changed it and refuses a lower one (a fencing token): a leader elected
// later has a later acquire time, since it can only acquire after the
// previous holding expired. Unlike the Lease's transition count it does not
// go back to 0 when the Lease is recreated (an operator reinstalled), which
// would refuse every new leader. It assumes the clocks of the nodes the
// replicas run on differ by less than a lease duration.
func TermOf(l *coordinationv1.Lease) int64 {
	if l.Spec.AcquireTime == nil {
		return 0
	}
	return l.Spec.AcquireTime.UnixMicro()
}

// Check returns nil while this process holds the Lease, and an error
// wrapping ErrNotLeader once it does not.
func (f *Fence) Check(ctx context.Context) error {
	select {
	case <-f.known:
	case <-ctx.Done():
		return ctx.Err()
	}
	l, err := f.lease(ctx)
	if err != nil {
		return fmt.Errorf("read the leader Lease %s before a backend write: %w", f.key, err)
	}
	return Holds(l, f.id, f.now())
}

func (f *Fence) lease(ctx context.Context) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	return l, f.reader.Get(ctx, f.key, l)
}

// Holds decides whether the Lease l is held by id at now: it names id, and
// its last renewal is not older than its duration.
func Holds(l *coordinationv1.Lease, id string, now time.Time) error {
	s := l.Spec
	switch {
	case s.HolderIdentity == nil || *s.HolderIdentity != id:
		holder := "nobody"
		if s.HolderIdentity != nil && *s.HolderIdentity != "" {
			holder = *s.HolderIdentity
		}
		return fmt.Errorf("%w: the Lease %s/%s is held by %s", ErrNotLeader, l.Namespace, l.Name, holder)
	case s.RenewTime == nil || s.LeaseDurationSeconds == nil:
		return fmt.Errorf("%w: the Lease %s/%s has no renewal", ErrNotLeader, l.Namespace, l.Name)
	}
	expires := s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)
	if !now.Before(expires) {
		return fmt.Errorf("%w: this manager's Lease %s/%s expired %s ago", ErrNotLeader, l.Namespace, l.Name, now.Sub(expires).Round(time.Millisecond))
	}
	return nil
}
