package controller

import (
	"context"
	"strings"
	"sync"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/fake"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// The fake backend with two things of a real backend's world it lacks: a
// cluster identity (engine.Scoped, as RabbitMQ's cluster name) that can
// become unreadable, and instances that can be scaled to zero, which the
// plan reports (registry.Plan.NoInstances) and every call that would
// reach an instance refuses, with the MySQL backend's refusal (its
// forEachInstance). Faults a real server cannot produce on demand: the
// backends' own sides are proved on real servers (see each test).

const worldAnnotation = "world.rekey.io/store"

// world is what the test changes under the set.
type world struct {
	mu          sync.Mutex
	clusterErr  error // ClusterID fails with it (nil: "cluster-a")
	noInstances bool
	reached     []string // calls that reached instances
}

func (w *world) set(f func(*world)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w)
}

var worlds sync.Map // name → worldBackend

func init() {
	registry.Register(registry.Entry{
		Kind:    "world",
		Field:   "the " + worldAnnotation + " annotation",
		Selects: func(cs *v1.CredentialSet) bool { return cs.Annotations[worldAnnotation] != "" },
		Build: func(_ context.Context, cs *v1.CredentialSet, _ registry.Kube, _ registry.Options) (*registry.Plan, error) {
			v, ok := worlds.Load(cs.Annotations[worldAnnotation])
			if !ok {
				return nil, &registry.SpecError{Msg: "no world " + cs.Annotations[worldAnnotation]}
			}
			b := v.(worldBackend)
			b.w.mu.Lock()
			defer b.w.mu.Unlock()
			return &registry.Plan{Backend: b, NoInstances: b.w.noInstances}, nil
		},
		LockKeys: func(cs *v1.CredentialSet) []string { return []string{"world:" + cs.Annotations[worldAnnotation]} },
	})
}

type worldBackend struct {
	*fake.Store
	w *world
}

var (
	_ engine.Scoped   = worldBackend{}
	_ engine.Repairer = worldBackend{}
)

func (b worldBackend) ClusterID(context.Context) (string, error) {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	if b.w.clusterErr != nil {
		return "", b.w.clusterErr
	}
	return "cluster-a", nil
}

// reach records a call that goes to the instances and refuses it when
// there are none.
func (b worldBackend) reach(method string) error {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	b.w.reached = append(b.w.reached, method)
	if b.w.noInstances {
		return &engine.Refusal{Reason: string(reason.RotateRefused), Message: "no instances: scale the cluster up"}
	}
	return nil
}

func (b worldBackend) RepairPending(context.Context, engine.Secrets, engine.Secrets) error {
	return b.reach("RepairPending")
}

func (b worldBackend) Precheck(ctx context.Context, cur engine.Secrets) error {
	if err := b.reach("Precheck"); err != nil {
		return err
	}
	return b.Store.Precheck(ctx, cur)
}

func (b worldBackend) Apply(ctx context.Context, cur, pending engine.Secrets, gen int64) (engine.Secrets, error) {
	if err := b.reach("Apply"); err != nil {
		return nil, err
	}
	return b.Store.Apply(ctx, cur, pending, gen)
}

func (b worldBackend) Retire(ctx context.Context, cur, pending engine.Secrets) error {
	if err := b.reach("Retire"); err != nil {
		return err
	}
	return b.Store.Retire(ctx, cur, pending)
}

func (b worldBackend) Reset(ctx context.Context, cur engine.Secrets) error {
	if err := b.reach("Reset"); err != nil {
		return err
	}
	return b.Store.Reset(ctx, cur)
}

func (b worldBackend) Verify(ctx context.Context, s engine.Secrets) error {
	if err := b.reach("Verify"); err != nil {
		return err
	}
	return b.Store.Verify(ctx, s)
}

// newWorldRig is newRig with the set on a worldBackend over the rig's store.
func newWorldRig(t *testing.T, traits engine.Traits, consumer bool) (*rig, *world) {
	t.Helper()
	g := newRig(t, traits, consumer)
	name := strings.ReplaceAll(t.Name(), "/", "-")
	w := &world{}
	worlds.Store(name, worldBackend{Store: g.store, w: w})
	t.Cleanup(func() { worlds.Delete(name) })
	cs := g.set()
	delete(cs.Annotations, fake.Annotation)
	cs.Annotations[worldAnnotation] = name
	if err := g.kc.Update(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	return g, w
}

// warnings counts the Warning Events recorded from index from on, by reason.
func (g *rig) warnings(from int) map[string]int {
	out := map[string]int{}
	for _, e := range g.events(from) {
		if r, ok := strings.CutPrefix(e, "Warning "); ok {
			out[r]++
		}
	}
	return out
}

// condition is the set's condition of type typ, nil when it has none.
func (g *rig) condition(typ string) *conditionView {
	for _, c := range g.set().Status.Conditions {
		if c.Type == typ {
			return &conditionView{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
		}
	}
	return nil
}

type conditionView struct{ Status, Reason, Message string }
