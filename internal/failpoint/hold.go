package failpoint

import "os"

// Holding the leader elector of a paused leader. When a frozen leader
// wakes, two things race: its in-flight reconcile, which goes on with what
// it read before, and its leader elector, whose renew deadline passed
// during the pause, so that it gives up at once and the process exits. On
// a loaded machine the elector often wins, and the stale reconcile never
// reaches the backend: the two-manager tests could then not show that the
// backend's own fence refuses a stale leader that gets that far. A
// ":hold" failpoint makes the worst case certain:
//
//  1. at the hit, the elector's next request to its Lease waits
//     (LeaderRequest); only once it waits does the process stop, so the
//     elector is stopped with it in no timed wait that could run out;
//  2. when the process resumes, it keeps waiting until every reconcile
//     that was under way at the pause (Reconciling) has ended — the paused
//     one has then made every backend call it goes on to;
//  3. then the elector goes on, finds its renew deadline passed, and the
//     process exits, as it would have.
//
// Only a process with leader election can be held (the hit waits for an
// elector), and only test builds can arm one (see the package comment).

var (
	// parked is closed when the elector waits at the closed gate (nil:
	// nobody waits for that).
	parked chan struct{}
	// gate, while non-nil, holds the elector's requests until it is closed.
	gate chan struct{}
	// active: the reconciles under way, by token; awaited: those under
	// way when the held process resumed and not yet ended.
	active  = map[uint64]struct{}{}
	awaited map[uint64]struct{}
	token   uint64
)

// LeaderRequest is called before each request the leader elector makes
// to its Lease (the manager the end-to-end tests build wires it in). It
// returns at once unless a ":hold" failpoint holds the elector.
func LeaderRequest() {
	mu.Lock()
	g := gate
	if g != nil && parked != nil {
		close(parked)
		parked = nil
	}
	mu.Unlock()
	if g != nil {
		<-g
	}
}

// Reconciling notes a reconcile under way; call what it returns when the
// reconcile ends. It costs nothing unless a ":hold" failpoint is armed.
func Reconciling() (ended func()) {
	once.Do(func() { set(envSpec()) })
	mu.Lock()
	defer mu.Unlock()
	if !held {
		return func() {}
	}
	token++
	id := token
	active[id] = struct{}{}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		delete(active, id)
		if awaited != nil {
			delete(awaited, id)
			releaseIfDone()
		}
	}
}

// holdAndStop is a ":hold" hit of name: steps 1 and 2 above.
func holdAndStop(name string) {
	p := make(chan struct{})
	mu.Lock()
	parked, gate = p, make(chan struct{})
	mu.Unlock()
	os.Stderr.WriteString("failpoint " + name + " hit: holding the leader elector\n")
	<-p
	os.Stderr.WriteString("failpoint " + name + " hit: pausing the process\n")
	stop()
	os.Stderr.WriteString("failpoint " + name + ": resumed; the leader elector waits until the reconciles under way have ended\n")
	mu.Lock()
	defer mu.Unlock()
	awaited = map[uint64]struct{}{}
	for id := range active {
		awaited[id] = struct{}{}
	}
	releaseIfDone()
}

// releaseIfDone opens the gate once no awaited reconcile is left (mu
// held).
func releaseIfDone() {
	if gate == nil || len(awaited) > 0 {
		return
	}
	close(gate)
	gate, awaited = nil, nil
	os.Stderr.WriteString("failpoint: the reconciles under way at the pause have ended; the leader elector goes on\n")
}
