package controller

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"

	"rekey.io/rekey/internal/backend/fake"
	"rekey.io/rekey/internal/engine"
)

// countingReader counts the live reads of one object.
type countingReader struct {
	client.Reader
	key client.ObjectKey
	n   atomic.Int32
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok && key == c.key {
		c.n.Add(1)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestTargetReadOncePerReconcile: the reconciles of a rotation's steps
// each read the distribution Secret at most once (the one that distributes
// checks it, still serving the current secrets, and writes the new ones
// with that read's resourceVersion); a change made to it between that read
// and the write is refused by the write's resourceVersion and served again
// by the next reconcile, never overwritten unseen.
func TestTargetReadOncePerReconcile(t *testing.T) {
	g := newRig(t, overlap, false)
	g.settle()
	reads := &countingReader{Reader: g.r.APIReader, key: client.ObjectKey{Namespace: "app", Name: "db-creds"}}
	g.r.APIReader = reads

	g.annotate(engine.RotateAnnotation, "r2")
	for i := 0; g.set().Status.Phase != "Distributed"; i++ {
		if i == 5 {
			t.Fatalf("not Distributed after 5 reconciles: phase %s, step %s", g.set().Status.Phase, g.set().Status.Step)
		}
		reads.n.Store(0)
		if err := g.reconcile(); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		if n := reads.n.Load(); n > 1 {
			t.Fatalf("the distribution Secret was read %d times in one reconcile (step %s), want at most 1", n, g.set().Status.Step)
		}
	}
	if g.served() != g2 {
		t.Fatalf("Distributed, serving %q; want %s", g.served(), g2)
	}

	// A hand edit after the read, before the write of the next rotation.
	g.annotate(engine.DiscardAnnotation, "r2")
	g.settle()
	g.annotate(engine.RotateAnnotation, "r3")
	edited := false
	g.r.Client = interceptUpdate(g.r.Client, func(ctx context.Context, s *corev1.Secret) {
		if edited || s.Name != "db-creds" {
			return
		}
		edited = true
		cur := &corev1.Secret{}
		if err := g.kc.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			t.Fatal(err)
		}
		cur.Data = map[string][]byte{fake.Key: []byte("hand-edit")}
		if err := g.kc.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	})
	for i := 0; i < 5 && !edited; i++ {
		_ = g.reconcile() // the conflict is the outcome of the reconcile that writes
	}
	if !edited {
		t.Fatal("the distribution Secret was never written")
	}
	if got := g.served(); got == fake.Secret(3) {
		t.Fatalf("the write overwrote a change it never read")
	}
	g.settle()
	if got, want := g.served(), fake.Secret(3); got != want {
		t.Fatalf("after the conflict: served %q, want %q", got, want)
	}
}

// interceptUpdate runs before ahead of every Secret update through c.
func interceptUpdate(c client.Client, before func(context.Context, *corev1.Secret)) client.Client {
	return &updateHook{Client: c, before: before}
}

type updateHook struct {
	client.Client
	before func(context.Context, *corev1.Secret)
}

func (h *updateHook) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if s, ok := obj.(*corev1.Secret); ok {
		h.before(ctx, s)
	}
	return h.Client.Update(ctx, obj, opts...)
}

// setReads counts the live reads of CredentialSets.
type setReads struct {
	client.Reader
	n atomic.Int32
}

func (c *setReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1.CredentialSet); ok {
		c.n.Add(1)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestLockWaitCostsNoRead: a set whose backend another set holds waits
// without a live read of itself (the lock is tried on the cached copy);
// once the backend is free it reconciles from a live read.
func TestLockWaitCostsNoRead(t *testing.T) {
	g := newRig(t, overlap, false)
	reads := &setReads{Reader: g.r.APIReader}
	g.r.APIReader = reads
	other := types.NamespacedName{Namespace: "app", Name: "other"}
	keys := BackendLockKeys(g.set())
	if len(keys) == 0 {
		t.Fatal("the fake backend names no lock key")
	}
	if _, ok := g.r.lockTable().tryLock(other, keys); !ok {
		t.Fatal("could not take the backend for another set")
	}
	if err := g.reconcile(); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if n := reads.n.Load(); n != 0 {
		t.Fatalf("a set waiting for its backend read itself %d times from the API server, want 0", n)
	}
	if g.set().Status.Phase != "" {
		t.Fatalf("a set waiting for its backend was reconciled: phase %q", g.set().Status.Phase)
	}
	g.r.lockTable().unlock(other, keys)
	g.settle()
	if reads.n.Load() == 0 || g.set().Status.KeyGeneration != 1 || g.served() != g1 {
		t.Fatalf("after the backend was freed: %d live reads, generation %d, served %q", reads.n.Load(), g.set().Status.KeyGeneration, g.served())
	}
}
