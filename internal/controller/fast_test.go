package controller

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/fake"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

var (
	overlap = engine.Traits{Overlap: true}
	inPlace = engine.Traits{}
	g1, g2  = fake.Secret(1), fake.Secret(2)
)

// Where a case starts.
func fromNew(*rig) {}

func fromIdle(g *rig) { g.settle() }

func fromDistributed(g *rig) {
	fromIdle(g)
	g.annotate(engine.RotateAnnotation, "r2")
	g.settle()
}

func fromCompleted(g *rig) {
	fromDistributed(g)
	g.annotate(engine.DiscardAnnotation, "r2")
	g.settle()
}

// request annotates the set and reconciles once.
func request(annotation, value string) func(*rig) {
	return func(g *rig) {
		g.annotate(annotation, value)
		if err := g.reconcile(); err != nil {
			g.t.Fatalf("reconcile: %v", err)
		}
	}
}

// TestEngineActions runs each of the engine's actions through the real
// reconciler (fake client, fake backend) and checks what users see: what
// the distribution Secret serves, which secrets the backend accepts, the
// phase, and the Events.
func TestEngineActions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		traits   engine.Traits
		consumer bool // Deployment app/web uses the set and never rolls out
		from     func(*rig)
		act      func(*rig)
		phase    v1.RotationPhase
		keyGen   int64
		served   string
		accepts  []string
		refuses  []string
		events   []string // recorded by act, in this order (others may come between)
		gone     []string // annotations act removes
	}{
		{name: "provision: minted, stored, then made valid and served", traits: overlap, from: fromNew,
			act:   func(g *rig) { g.settle() },
			phase: v1.PhaseIdle, keyGen: 1, served: g1, accepts: []string{g1},
			events: []string{"Normal Provisioned"}},
		{name: "provision, read back: the backend mints, rekey stores and serves it", traits: engine.Traits{ReadBack: true, Overlap: true}, from: fromNew,
			act:   func(g *rig) { g.settle() },
			phase: v1.PhaseIdle, keyGen: 1, served: g1, accepts: []string{g1},
			events: []string{"Normal Provisioned"}},
		{name: "start and continue a rotation: both valid, the new one served", traits: overlap, from: fromIdle,
			act:   func(g *rig) { g.annotate(engine.RotateAnnotation, "r2"); g.settle() },
			phase: v1.PhaseDistributed, keyGen: 1, served: g2, accepts: []string{g1, g2},
			events: []string{"Normal RotationStarted", "Normal Distributed"}},
		{name: "discard: the old one no longer logs in", traits: overlap, from: fromDistributed,
			act:   func(g *rig) { g.annotate(engine.DiscardAnnotation, "r2"); g.settle() },
			phase: v1.PhaseIdle, keyGen: 2, served: g2, accepts: []string{g2}, refuses: []string{g1},
			events: []string{"Normal RotationCompleted"}},
		{name: "rollback: the old one served and the only one valid again", traits: overlap, from: fromDistributed,
			act:   func(g *rig) { g.annotate(engine.AbortAnnotation, "r2"); g.settle() },
			phase: v1.PhaseIdle, keyGen: 1, served: g1, accepts: []string{g1}, refuses: []string{g2},
			events: []string{"Normal RotationAborted"}},
		{name: "in place, rollback after apply: refused, the rotation can only complete", traits: inPlace, from: fromDistributed,
			act:   func(g *rig) { g.annotate(engine.AbortAnnotation, "r2"); g.settle() },
			phase: v1.PhaseDistributed, keyGen: 1, served: g2, accepts: []string{g2}, refuses: []string{g1},
			events: []string{"Warning " + string(reason.AbortSkipped)}},
		{name: "refuse: a failed pre-check is a Warning and changes nothing", traits: overlap, from: fromIdle,
			act: func(g *rig) {
				g.store.FailNext("Precheck", &engine.Refusal{Reason: string(reason.ClusterUnhealthy), Message: "not now"})
				g.annotate(engine.RotateAnnotation, "r2")
				if err := g.reconcile(); err != nil {
					t.Fatalf("a refusal is a problem, not an error: %v", err)
				}
			},
			phase: v1.PhaseIdle, keyGen: 1, served: g1, accepts: []string{g1}, refuses: []string{g2},
			events: []string{"Warning " + string(reason.ClusterUnhealthy)}},
		{name: "a backend error in apply: reported, retried, and the rotation resumes", traits: overlap, from: fromIdle,
			act: func(g *rig) {
				g.store.FailNext("Apply", errors.New("connection reset"))
				g.annotate(engine.RotateAnnotation, "r2")
				var err error
				for i := 0; i < 5 && err == nil; i++ {
					err = g.reconcile()
				}
				if err == nil {
					t.Fatal("the injected failure never surfaced")
				}
				g.settle()
			},
			phase: v1.PhaseDistributed, keyGen: 1, served: g2, accepts: []string{g1, g2},
			events: []string{"Normal RotationStarted", "Warning " + string(reason.BackendError), "Normal Distributed"}},
		{name: "a source Secret edited by hand never reaches consumers", traits: overlap, from: fromIdle,
			act: func(g *rig) {
				src := &corev1.Secret{}
				key := client.ObjectKey{Namespace: fastNamespace, Name: naming.SourceSecretName(g.set())}
				if err := g.kc.Get(context.Background(), key, src); err != nil {
					t.Fatal(err)
				}
				src.Data[fake.Key] = []byte("forged")
				if err := g.kc.Update(context.Background(), src); err != nil {
					t.Fatal(err)
				}
				// A distribution Secret lost: rekey restores it only with
				// what the backend accepts.
				if err := g.kc.Delete(context.Background(), &corev1.Secret{ObjectMeta: metaOf("app", "db-creds")}); err != nil {
					t.Fatal(err)
				}
				_ = g.reconcile()
			},
			phase: v1.PhaseIdle, keyGen: 1, served: "", accepts: []string{g1}, refuses: []string{"forged"},
			events: []string{"Warning " + string(reason.PendingRejected)}},
		{name: "a served rotate request is dropped, nothing else", traits: overlap, from: fromDistributed,
			act:   request(engine.RotateAnnotation, "r2"),
			phase: v1.PhaseDistributed, keyGen: 1, served: g2, accepts: []string{g1, g2}, gone: []string{engine.RotateAnnotation}},
		{name: "another rotation while one is active: refused and dropped", traits: overlap, from: fromDistributed,
			act:   request(engine.RotateAnnotation, "r3"),
			phase: v1.PhaseDistributed, keyGen: 1, served: g2, accepts: []string{g1, g2}, refuses: []string{fake.Secret(3)},
			events: []string{"Warning " + string(reason.RotateRefused)}, gone: []string{engine.RotateAnnotation}},
		{name: "a served discard request is dropped, nothing else", traits: overlap, from: fromCompleted,
			act:   request(engine.DiscardAnnotation, "r2"),
			phase: v1.PhaseIdle, keyGen: 2, served: g2, accepts: []string{g2}, refuses: []string{g1}, gone: []string{engine.DiscardAnnotation}},
		{name: "recover: an idle set's backend reset to the current secrets", traits: overlap, from: fromIdle,
			act: func(g *rig) {
				g.store.Allow("stray")
				g.annotate(engine.RecoverAnnotation, "rec1")
				g.settle()
			},
			phase: v1.PhaseIdle, keyGen: 1, served: g1, accepts: []string{g1}, refuses: []string{"stray"},
			events: []string{"Normal " + string(reason.RecoveryStarted)}},
		{name: "wait: a rollback resets the backend only once consumers rolled back", traits: overlap, consumer: true, from: fromDistributed,
			act:   func(g *rig) { g.annotate(engine.AbortAnnotation, "r2"); g.settle() },
			phase: v1.PhaseIdle, keyGen: 1, served: g1, accepts: []string{g1, g2},
			events: []string{"Normal RotationAborted", "Normal " + string(reason.WaitingForRollout)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, tc.traits, tc.consumer)
			tc.from(g)
			seen := len(g.ev.got)
			tc.act(g)
			cs := g.set()
			if cs.Status.Phase != tc.phase || cs.Status.KeyGeneration != tc.keyGen {
				t.Errorf("phase %s at key generation %d, want %s at %d", cs.Status.Phase, cs.Status.KeyGeneration, tc.phase, tc.keyGen)
			}
			if got := g.served(); got != tc.served {
				t.Errorf("consumers are served %q, want %q", got, tc.served)
			}
			for _, s := range tc.accepts {
				if !g.store.Accepts(s) {
					t.Errorf("the backend refuses %s", s)
				}
			}
			for _, s := range tc.refuses {
				if g.store.Accepts(s) {
					t.Errorf("the backend still accepts %s", s)
				}
			}
			for _, a := range tc.gone {
				if v, ok := cs.Annotations[a]; ok {
					t.Errorf("annotation %s=%s was not removed", a, v)
				}
			}
			if got := g.events(seen); !subsequence(tc.events, got) {
				t.Errorf("events %v, want %v among them in order", got, tc.events)
			}
		})
	}
}

// subsequence: want appears in got in order.
func subsequence(want, got []string) bool {
	for _, w := range want {
		i := slices.Index(got, w)
		if i < 0 {
			return false
		}
		got = got[i+1:]
	}
	return true
}
