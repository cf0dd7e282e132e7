package explorer

import (
	"fmt"
	"math/rand"
	"strings"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Start is the world after provisioning: generation 1 adopted from what
// the instances held, distributed, the consumer's pod running it, and a
// backup of the set's status and source Secret taken then.
func Start(o Options) (*World, error) {
	w := NewWorld(o.Instances...)
	if o.RabbitMQ {
		w = NewRabbitWorld()
		if o.Adopt { // spec.rabbitmq.adopt: a user the broker has before rekey (rabbitadopt.go)
			rabbitAdopt(w)
		}
	}
	if o.Ceph {
		w = NewCephWorld()
		if o.KeepPriors > 0 { // read by the model (cephpriors.go); absent, it keeps none
			w.Set.Annotations[KeepPriorsAnnotation] = fmt.Sprint(o.KeepPriors)
		}
	}
	if o.CephInPlace {
		w = NewCephInPlaceWorld()
	}
	if o.CephAdmin {
		w = NewCephAdminWorld()
	}
	if o.Postgres {
		w = NewPostgresWorld()
		pgConfigure(w, o) // spec.postgres's logins, terminateSessions and adopt (pglogins.go)
	}
	w.Set.Spec.DeletionPolicy = o.Policy
	w.FixedAdmin = o.FixedAdmin || o.RabbitMQ || o.Ceph || o.CephInPlace || o.CephAdmin || o.Postgres
	if o.Schedule {
		w.Set.Spec.Rotation = scheduled(w.Set.Spec.Rotation)
	}
	if o.AppMade {
		for _, in := range w.Instances {
			delete(in.Users, AppKey)
		}
	}
	for i := 0; i < 5 && w.Set.Status.KeyGeneration == 0; i++ {
		if _, err := w.Reconcile(""); err != nil {
			return nil, fmt.Errorf("provisioning: %w (%v)", err, w.Warnings)
		}
	}
	if w.Set.Status.KeyGeneration == 0 || w.Source == nil || w.Dist == nil {
		return nil, fmt.Errorf("provisioning did not finish: %s %v", w.Summary(), w.Warnings)
	}
	if _, err := w.Reconcile(""); err != nil {
		return nil, err
	}
	restartPod(w)
	if o.TwoSets {
		if err := addPeer(w); err != nil {
			return nil, err
		}
	}
	if o.Backups {
		w.Backup = &Backup{Status: *w.Set.Status.DeepCopy(), Source: w.Source.DeepCopy().Data}
	}
	w.Warnings = nil
	return w, nil
}

// Step is one transition taken, and the state it led to.
type Step struct {
	Label string
	World *World
}

// Successors are every state w leads to in one transition: a reconcile,
// a reconcile that crashes the manager at each persisted step it passes
// (the n-th pass of a step that repeats, once per instance), and each
// transition of o that applies.
func Successors(w *World, o Options) []Step {
	out := successors(w, o)
	if !o.StaleReads {
		// Not read by any transition: kept, it would only split states.
		for _, s := range out {
			s.World.Older = nil
			if s.World.Peer != nil {
				s.World.Peer.Older = nil
			}
		}
	}
	return out
}

func successors(w *World, o Options) []Step {
	out := reconciles(w, o, itself)
	if w.Peer != nil {
		out = append(out, reconciles(w, o, peerOf)...)
	}
	if o.StaleReads && w.Older != nil {
		c := w.Clone()
		err := c.ReconcileStale()
		out = append(out, Step{"reconcile by a manager whose cache holds the set before its last status change" + errNote(err), c})
	}
	for _, t := range Transitions(o) {
		c := w.Clone()
		c.Warnings, c.Unsafe = nil, nil
		if t.Apply(c) {
			c.link()
			out = append(out, Step{t.Name, c})
		}
	}
	return out
}

func errNote(err error) string {
	if err == nil {
		return ""
	}
	return " (error: " + err.Error() + ")"
}

// Violation is a state that breaks an invariant, with the shortest trace
// that reaches it.
type Violation struct {
	Invariant string
	Detail    string
	Trace     []Step
	// States explored when it was found.
	States int
}

func (v *Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s violated after %d steps (%d states explored): %s\n", v.Invariant, len(v.Trace)-1, v.States, v.Detail)
	for i, s := range v.Trace {
		fmt.Fprintf(&b, "  %2d. %s\n      %s%s\n", i, s.Label, s.World.Summary(), warningsNote(s.World))
	}
	return b.String()
}

// Report is what a run covered.
type Report struct {
	States, Transitions, Depth, Checks int
	Elapsed                            time.Duration
	// Complete: every state up to Depth was explored.
	Complete   bool
	Violations []*Violation
}

func (r Report) String() string {
	return fmt.Sprintf("%d states, %d transitions, depth %d (complete: %v), %d invariant checks, %d violations, in %s",
		r.States, r.Transitions, r.Depth, r.Complete, r.Checks, len(r.Violations), r.Elapsed.Round(time.Millisecond))
}

type edge struct {
	parent string
	label  string
	world  *World
}

// check runs every invariant on w; the first broken one, if any.
func check(w *World, r *Report) (string, string) {
	for _, inv := range Invariants() {
		r.Checks++
		if d := inv.Check(w); d != "" {
			return inv.Name, d
		}
		if p := w.link(); p != nil {
			r.Checks++
			if d := inv.Check(p); d != "" {
				return inv.Name, peerName + ": " + d
			}
		}
	}
	return "", ""
}

// BFS explores breadth first from start up to maxDepth transitions, or
// until budget runs out, and stops at the first violation of each
// invariant (states that break one are not explored further).
func BFS(start *World, o Options, maxDepth int, budget time.Duration) Report {
	began := time.Now()
	r := Report{}
	edges := map[string]edge{start.Hash(): {label: "start", world: start}}
	frontier := []*World{start}
	found := map[string]bool{}
	r.States = 1
	for depth := 0; depth < maxDepth && len(frontier) > 0; depth++ {
		var next []*World
		for _, w := range frontier {
			if time.Since(began) > budget {
				r.Elapsed = time.Since(began)
				return r
			}
			wh := w.Hash()
			for _, s := range Successors(w, o) {
				r.Transitions++
				h := s.World.Hash()
				if _, seen := edges[h]; seen {
					continue
				}
				edges[h] = edge{parent: wh, label: s.Label, world: s.World}
				r.States++
				if o.Observe != nil {
					o.Observe(s.World)
				}
				if inv, d := check(s.World, &r); inv != "" {
					if !found[inv] {
						found[inv] = true
						r.Violations = append(r.Violations, &Violation{inv, d, traceTo(edges, h), r.States})
					}
					continue
				}
				next = append(next, s.World)
			}
		}
		frontier = next
		r.Depth = depth + 1
	}
	r.Complete = true
	r.Elapsed = time.Since(began)
	return r
}

func traceTo(edges map[string]edge, h string) []Step {
	var out []Step
	for h != "" {
		e := edges[h]
		out = append([]Step{{e.label, e.world}}, out...)
		h = e.parent
	}
	return out
}

// Walk takes walks random walks of length steps from start with seed.
func Walk(start *World, o Options, seed int64, walks, steps int, budget time.Duration) Report {
	began := time.Now()
	rng := rand.New(rand.NewSource(seed))
	r := Report{}
	seen := map[string]bool{}
	for i := 0; i < walks && time.Since(began) < budget; i++ {
		trace := []Step{{"start", start}}
		w := start
		wo := o
		// A deleted set soon ends a walk: every other walk never deletes,
		// so that half of them still go the whole length.
		wo.Deletion = o.Deletion && i%2 == 1
		for j := 0; j < steps && !w.Gone; j++ {
			succ := Successors(w, wo)
			s := succ[rng.Intn(len(succ))]
			r.Transitions++
			trace = append(trace, s)
			w = s.World
			h := w.Hash()
			if seen[h] {
				continue
			}
			seen[h] = true
			r.States++
			if inv, d := check(w, &r); inv != "" {
				r.Violations = append(r.Violations, &Violation{inv, d, trace, r.States})
				r.Elapsed = time.Since(began)
				return r
			}
		}
		r.Depth = max(r.Depth, steps)
	}
	r.Complete = true
	r.Elapsed = time.Since(began)
	return r
}

// Idle reports whether w is Idle with nothing pending.
func Idle(w *World) bool {
	st := w.Set.Status
	return st.Phase == v1.PhaseIdle && !st.ResetPending
}
