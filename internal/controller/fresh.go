package controller

import (
	"context"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// freshReads reads the set, its source Secret and its distribution Secrets
// from the manager's cache when the cache holds this manager's last write of
// the object or something newer, and from the API server otherwise.
//
// What must never happen is a decision made on an object older than what
// this manager itself wrote (a source Secret without the pending secrets it
// stored would mint them twice; a set before its own transition would redo
// a step). The cache only ever lags: everything it shows that is at least
// this manager's last write is what a live read made a moment earlier could
// have returned, and a change made since by anyone else reaches the cache as
// an event that queues the set again. Resource versions are compared as
// Kubernetes defines them for one resource (comparable integers); one that
// is not is read live.
//
// Read live in every reconcile, they cost 9 to 15 of a rotation's 28 to 36
// requests (BenchmarkAPIRequests when the live design still shipped).
type freshReads struct {
	cache client.Reader // nil: every read is live
	live  client.Reader

	mu sync.Mutex
	// written is, per object, the resourceVersion of this manager's last
	// write of it, or readLive after a write that failed (a conflict, a
	// timeout that may have landed, a delete): the next read goes to the
	// server. An entry is dropped once the cache is seen to hold the write.
	written map[freshKey]string
	// own is, per Secret, the resourceVersion of this manager's last
	// successful write of it, kept after the cache caught up: the watch
	// event of that very version is rekey hearing itself (ownWrite).
	own map[freshKey]string
	// copies holds, per set, the object the server returned for this
	// manager's last write of it (at the resourceVersion written records):
	// the server's state at that version, as good as a cache that holds
	// it, so a read while the cache is still behind the write needs no
	// request. Anyone else's later change reaches the cache as an event
	// that wakes the set again, exactly as when a live read had missed it.
	copies map[freshKey]client.Object
	// carried holds, per set, the bootstrap Secrets the reconcile that
	// wrote it last read, for the reconcile that write wakes (carry.go).
	carried map[types.NamespacedName]carried
}

// readLive marks an object whose server state this manager cannot vouch for.
const readLive = "live"

type freshKey struct {
	kind reflect.Type
	types.NamespacedName
}

func keyOf(obj client.Object) freshKey {
	return freshKey{reflect.TypeOf(obj), types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
}

// cacheCurrent: a cached copy at resourceVersion cached may be used when
// this manager wrote nothing of the object since it started (want empty),
// or its last write (want) is no newer than the copy.
func cacheCurrent(cached, want string) bool {
	if want == "" {
		return true
	}
	if want == readLive {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(cached, want)
	return err == nil && c >= 0
}

// Get reads key into obj (a pointer to an empty object).
func (f *freshReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	if f.cache == nil {
		return f.live.Get(ctx, key, obj)
	}
	k := freshKey{reflect.TypeOf(obj), key}
	f.mu.Lock()
	want := f.written[k]
	f.mu.Unlock()
	if want != readLive {
		// Read into a copy: a cached object that will not do must leave
		// nothing behind in obj for the live read to merge into.
		cached := reflect.New(k.kind.Elem()).Interface().(client.Object)
		// Not in the cache (not yet seen, deleted, not labelled as
		// rekey's, a namespace it does not cover): the server says.
		if err := f.cache.Get(ctx, key, cached); err == nil && cacheCurrent(cached.GetResourceVersion(), want) {
			f.caughtUp(k, want)
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(cached).Elem())
			return nil
		}
		if c := f.copyAt(k, want); c != nil {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(c).Elem())
			return nil
		}
	}
	return f.live.Get(ctx, key, obj)
}

// caughtUp forgets the record of a write the cache now holds, unless a
// newer write replaced it meanwhile.
func (f *freshReads) caughtUp(k freshKey, want string) {
	if want == "" {
		return
	}
	f.mu.Lock()
	if f.written[k] == want {
		delete(f.written, k)
		delete(f.copies, k)
	}
	f.mu.Unlock()
}

// copyAt is a copy of the server's answer to this manager's last write of
// k, if that write is the one at resourceVersion want; nil otherwise.
func (f *freshReads) copyAt(k freshKey, want string) client.Object {
	if want == "" || want == readLive {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.copies[k]
	if !ok || c.GetResourceVersion() != want {
		return nil
	}
	return c.DeepCopyObject().(client.Object)
}

// wrote records the outcome of a write of obj.
func (f *freshReads) wrote(obj client.Object, err error, deleted bool) {
	switch obj.(type) {
	case *v1.CredentialSet, *corev1.Secret:
	default:
		return // read only live or from the cache (workloads)
	}
	rv := obj.GetResourceVersion()
	if err != nil || deleted || rv == "" {
		if apierrors.IsNotFound(err) && deleted {
			return
		}
		rv = readLive
	}
	f.mu.Lock()
	if f.written == nil {
		f.written, f.own, f.copies = map[freshKey]string{}, map[freshKey]string{}, map[freshKey]client.Object{}
	}
	k := keyOf(obj)
	f.written[k] = rv
	if _, set := obj.(*v1.CredentialSet); set && rv != readLive {
		f.copies[k] = obj.DeepCopyObject().(client.Object)
	} else {
		delete(f.copies, k)
	}
	if _, secret := obj.(*corev1.Secret); secret && rv != readLive {
		f.own[k] = rv
	} else {
		delete(f.own, k)
	}
	f.mu.Unlock()
}

// wokenLater: cs, a version of the set the watch delivers, is older than
// this manager's last write of it, and that write's own event, still to
// come, wakes the set in any case (setUpdateWakes from cs to it): waking
// for cs too would only run one more reconcile, on a copy the pass that
// wrote since has already moved past. A pass writes a set several times
// (each step's status, a request annotation removed); without this each
// write's event that arrived after the pass ended queued another one. The
// write's event is still to come while its copy is kept (dropped only once
// a read found the cache holding it); a change by anyone else between the
// two is read by the reconcile that the later event wakes.
func (f *freshReads) wokenLater(cs *v1.CredentialSet) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.copies[keyOf(cs)].(*v1.CredentialSet)
	if !ok {
		return false
	}
	newer, err := resourceversion.CompareResourceVersion(c.ResourceVersion, cs.ResourceVersion)
	return err == nil && newer > 0 && setUpdateWakes(cs, c)
}

// ownWrite: obj is a Secret exactly as this manager's last write of it
// left it.
func (f *freshReads) ownWrite(obj client.Object) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	rv, ok := f.own[keyOf(obj)]
	return ok && rv == obj.GetResourceVersion()
}

// recordingClient is the manager's client with every write of a set or a
// Secret recorded in freshReads.
type recordingClient struct {
	client.Client
	f *freshReads
}

func (c recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	c.f.wrote(obj, err, false)
	return err
}

func (c recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	c.f.wrote(obj, err, false)
	return err
}

func (c recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, patch, opts...)
	c.f.wrote(obj, err, false)
	return err
}

func (c recordingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	c.f.wrote(obj, err, true)
	return err
}

func (c recordingClient) Status() client.SubResourceWriter {
	return recordingStatus{c.Client.Status(), c.f}
}

type recordingStatus struct {
	client.SubResourceWriter
	f *freshReads
}

func (s recordingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	s.f.wrote(obj, err, false)
	return err
}

func (s recordingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	s.f.wrote(obj, err, false)
	return err
}
