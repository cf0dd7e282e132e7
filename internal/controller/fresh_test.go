package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestCacheCurrent(t *testing.T) {
	for _, tc := range []struct {
		name, cached, want string
		use                bool
	}{
		{"nothing written since start", "10", "", true},
		{"the cache holds the write", "10", "10", true},
		{"the cache holds a later change", "11", "10", true},
		{"the cache is behind the write", "9", "10", false},
		{"shorter is older", "99", "100", false},
		{"a failed write", "10", readLive, false},
		{"a version that is not a number", "abc", "10", false},
		{"a missing version", "", "10", false},
	} {
		if got := cacheCurrent(tc.cached, tc.want); got != tc.use {
			t.Errorf("%s: cacheCurrent(%q, %q) = %v, want %v", tc.name, tc.cached, tc.want, got, tc.use)
		}
	}
}

// liveCount counts the reads that reach the server.
type liveCount struct {
	client.Reader
	n int
}

func (l *liveCount) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	l.n++
	return l.Reader.Get(ctx, key, obj, opts...)
}

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFreshReads: a read comes from the cache only while the cache holds
// the writes this manager made; after a write the cache has not seen, a
// failed write or a delete, the server answers, and what the cache held
// leaves nothing in the object read.
func TestFreshReads(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "rekey-system", Name: "src"}
	server := fakeclient.NewClientBuilder().WithScheme(scheme(t)).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Annotations: map[string]string{"old": "x"}},
		Data:       map[string][]byte{"k": []byte("v1")},
	}).Build()
	// The cache holds what the server held before any write below, until
	// a test moves it on.
	cache := staticCache{&corev1.Secret{}}
	if err := server.Get(ctx, key, cache.s); err != nil {
		t.Fatal(err)
	}
	live := &liveCount{Reader: server}
	f := &freshReads{cache: cache, live: live}
	c := recordingClient{server, f}
	read := func() *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{}
		if err := f.Get(ctx, key, s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	if s := read(); string(s.Data["k"]) != "v1" || live.n != 0 {
		t.Fatalf("nothing written yet: want v1 from the cache, got %q with %d live reads", s.Data["k"], live.n)
	}

	// rekey writes: the cache has not seen it, so the server answers.
	s := read()
	s.Data["k"] = []byte("v2")
	delete(s.Annotations, "old")
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	got := read()
	if string(got.Data["k"]) != "v2" || live.n != 1 {
		t.Fatalf("after a write the cache lacks: want v2 read live, got %q with %d live reads", got.Data["k"], live.n)
	}
	if _, ok := got.Annotations["old"]; ok {
		t.Fatal("the cached copy's annotation leaked into the live read")
	}

	// The cache catches up: read from it again, and the record is dropped.
	if err := server.Get(ctx, key, cache.s); err != nil {
		t.Fatal(err)
	}
	if got := read(); string(got.Data["k"]) != "v2" || live.n != 1 {
		t.Fatalf("cache caught up: want v2 from it, got %q with %d live reads", got.Data["k"], live.n)
	}
	if len(f.written) != 0 {
		t.Fatalf("record kept once the cache holds the write: %v", f.written)
	}

	// A write that fails on a conflict: rekey's view is stale, the next
	// read is live even though the cache looks current.
	stale := got.DeepCopy()
	stale.ResourceVersion = "1"
	if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("want a conflict, got %v", err)
	}
	read()
	if live.n != 2 {
		t.Fatalf("after a conflict: want a live read, got %d live reads in all", live.n)
	}

	// A delete: the server says it is gone, whatever the cache holds.
	if err := c.Delete(ctx, got.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := f.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after a delete: want NotFound from the server, got %v", err)
	}
}

// staticCache is a cache that holds one object as it was when last
// copied in: a watch that has not yet delivered later writes.
type staticCache struct{ s *corev1.Secret }

func (c staticCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if key != client.ObjectKeyFromObject(c.s) {
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	c.s.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func (staticCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// TestNotOwnWrite: the watch event of rekey's own write of a Secret does not
// wake the set again; a later change by anyone, a failed write and a
// delete do.
func TestNotOwnWrite(t *testing.T) {
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db-creds"}}
	server := fakeclient.NewClientBuilder().WithScheme(scheme(t)).Build()
	r := &Reconciler{fresh: &freshReads{live: server}}
	c := recordingClient{server, r.fresh}
	p := r.notOwnWrite()
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if p.Create(event.CreateEvent{Object: s.DeepCopy()}) {
		t.Error("rekey's own create woke the set")
	}
	s.Data = map[string][]byte{"k": []byte("v")}
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if p.Update(event.UpdateEvent{ObjectOld: s.DeepCopy(), ObjectNew: s.DeepCopy()}) {
		t.Error("rekey's own update woke the set")
	}
	edited := s.DeepCopy()
	edited.Data["k"] = []byte("by hand")
	if err := server.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	if !p.Update(event.UpdateEvent{ObjectOld: s.DeepCopy(), ObjectNew: edited.DeepCopy()}) {
		t.Error("a hand edit did not wake the set")
	}
	if !p.Delete(event.DeleteEvent{Object: s.DeepCopy()}) {
		t.Error("a delete did not wake the set")
	}
	// A write that failed: rekey cannot vouch for any version.
	if err := c.Update(ctx, s.DeepCopy()); !apierrors.IsConflict(err) {
		t.Fatalf("want a conflict, got %v", err)
	}
	if !p.Update(event.UpdateEvent{ObjectOld: s.DeepCopy(), ObjectNew: s.DeepCopy()}) {
		t.Error("after a failed write, an event of the version rekey last wrote did not wake the set")
	}
	// A reconciler not set up with a manager reads live: every event
	// wakes the set.
	if !(&Reconciler{}).notOwnWrite().Create(event.CreateEvent{Object: s.DeepCopy()}) {
		t.Error("reading live: an event was filtered")
	}
}

// setCache is a cache that holds one set as it was when last copied in.
type setCache struct{ cs *v1.CredentialSet }

func (c setCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if key != client.ObjectKeyFromObject(c.cs) {
		return apierrors.NewNotFound(v1.GroupVersion.WithResource("credentialsets").GroupResource(), key.Name)
	}
	c.cs.DeepCopyInto(obj.(*v1.CredentialSet))
	return nil
}

func (setCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// TestFreshReadsOwnSetWrite: while the cache is behind rekey's last write
// of a set, a read gets the server's answer to that write without asking
// the server again; after a failed write it asks; once the cache holds the
// write, the copy is dropped and the cache answers.
func TestFreshReadsOwnSetWrite(t *testing.T) {
	ctx := context.Background()
	s := scheme(t)
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"}}
	server := fakeclient.NewClientBuilder().WithScheme(s).WithObjects(cs).WithStatusSubresource(cs).Build()
	key := client.ObjectKeyFromObject(cs)
	cache := setCache{&v1.CredentialSet{}}
	if err := server.Get(ctx, key, cache.cs); err != nil {
		t.Fatal(err)
	}
	live := &liveCount{Reader: server}
	f := &freshReads{cache: cache, live: live}
	c := recordingClient{server, f}
	read := func() *v1.CredentialSet {
		t.Helper()
		got := &v1.CredentialSet{}
		if err := f.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	w := read()
	w.Status.Phase, w.Status.RotationID = v1.PhaseRotating, "r1"
	if err := c.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	got := read()
	if got.Status.RotationID != "r1" || got.ResourceVersion != w.ResourceVersion || live.n != 0 {
		t.Fatalf("cache behind rekey's write: want the write's answer (r1 at %s) with no live read, got %q at %s with %d live reads",
			w.ResourceVersion, got.Status.RotationID, got.ResourceVersion, live.n)
	}
	// What the caller does with its copy stays its own.
	got.Status.RotationID = "changed by the caller"
	if again := read(); again.Status.RotationID != "r1" {
		t.Fatalf("a caller's edit leaked into the kept copy: %q", again.Status.RotationID)
	}

	// A write that fails: rekey cannot vouch for any version, so the server answers.
	stale := w.DeepCopy()
	stale.ResourceVersion = "1"
	if err := c.Status().Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("want a conflict, got %v", err)
	}
	if got := read(); got.Status.RotationID != "r1" || live.n != 1 {
		t.Fatalf("after a failed write: want r1 read live, got %q with %d live reads", got.Status.RotationID, live.n)
	}

	// Written again, then the cache catches up: the cache answers and the copy goes.
	w = read()
	w.Status.Phase = v1.PhaseDistributed
	if err := c.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := server.Get(ctx, key, cache.cs); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.Status.Phase != v1.PhaseDistributed || live.n != 2 {
		t.Fatalf("cache caught up: want Distributed from it, got %q with %d live reads", got.Status.Phase, live.n)
	}
	if len(f.written) != 0 || len(f.copies) != 0 {
		t.Fatalf("record kept once the cache holds the write: %v, %d copies", f.written, len(f.copies))
	}
}

// TestWokenLater: the watch event of a set version older than rekey's last
// write of it is dropped only when that write's own event wakes the set
// anyway; the write's own event, and any change the write does not move
// past, still wake it.
func TestWokenLater(t *testing.T) {
	ctx := context.Background()
	s := scheme(t)
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"}}
	server := fakeclient.NewClientBuilder().WithScheme(s).WithObjects(cs).WithStatusSubresource(cs).Build()
	f := &freshReads{live: server, cache: setCache{&v1.CredentialSet{}}}
	c := recordingClient{server, f}
	r := &Reconciler{fresh: f}
	wakes := func(old, cur *v1.CredentialSet) bool {
		return r.setWakes().Update(event.UpdateEvent{ObjectOld: old.DeepCopy(), ObjectNew: cur.DeepCopy()})
	}
	write := func(mutate func(*v1.CredentialSet)) *v1.CredentialSet {
		t.Helper()
		w := &v1.CredentialSet{}
		if err := server.Get(ctx, client.ObjectKeyFromObject(cs), w); err != nil {
			t.Fatal(err)
		}
		mutate(w)
		if err := c.Status().Update(ctx, w); err != nil {
			t.Fatal(err)
		}
		return w.DeepCopy()
	}
	v0 := &v1.CredentialSet{}
	if err := server.Get(ctx, client.ObjectKeyFromObject(cs), v0); err != nil {
		t.Fatal(err)
	}
	rotating := write(func(w *v1.CredentialSet) { w.Status.Phase, w.Status.RotationID = v1.PhaseRotating, "r1" })
	applied := write(func(w *v1.CredentialSet) { w.Status.RotateApplied = true })
	distributed := write(func(w *v1.CredentialSet) { w.Status.Phase = v1.PhaseDistributed })

	if wakes(v0, rotating) || wakes(rotating, applied) {
		t.Error("an event of a version a later write of rekey's moved past woke the set")
	}
	if !wakes(applied, distributed) {
		t.Error("the event of rekey's last write did not wake the set")
	}
	// A later write that restates only what the set reports (conditions):
	// its event does not wake, so the earlier change must.
	reported := write(func(w *v1.CredentialSet) {
		w.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Idle", LastTransitionTime: metav1.Now()}}
	})
	if !wakes(applied, distributed) {
		t.Error("a change no later event wakes for was dropped")
	}
	if wakes(distributed, reported) {
		t.Error("a conditions-only write woke the set")
	}
	// Someone else's change after rekey's last write wakes.
	edited := reported.DeepCopy()
	edited.Annotations = map[string]string{"rekey.io/discard": "r1"}
	if err := server.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	if !wakes(reported, edited) {
		t.Error("an annotation set by a person did not wake the set")
	}
	// No write kept (a failed one): every change wakes.
	stale := reported.DeepCopy()
	stale.ResourceVersion = "1"
	if err := c.Status().Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("want a conflict, got %v", err)
	}
	if !wakes(v0, rotating) {
		t.Error("after a failed write, an older change was dropped")
	}
}
