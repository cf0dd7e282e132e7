package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
)

// A real API server cannot be made to answer 409 at one exact step of a
// rotation, so the fault is injected at the manager's client boundary:
// conflictClient wraps the Reconciler's client and, for the one write an
// armed fault matches, either fails it with a conflict without sending it
// (raceNone), or first performs a real concurrent write and then sends it,
// so that the real server judges the stale write (raceBump, raceWin).

// writeKind classifies the manager's writes.
type writeKind string

const (
	kStatus     writeKind = "status patch"
	kAnnotation writeKind = "annotation patch"
	kSource     writeKind = "source Secret update"
	kDistUpdate writeKind = "distribution Secret update"
	kDistCreate writeKind = "distribution Secret create"
	kOther      writeKind = "other"
)

// write is one write of the manager as the injector sees it.
type write struct {
	kind          writeKind
	obj           client.Object
	patch         client.Patch // patches only
	body          []byte       // patches only
	before, after v1.CredentialSetStatus
	old, data     map[string][]byte // Secret data before (live) and sent
	dropped       map[string]bool   // annotations an annotation patch removes
	dropIf        map[string]string // the value a removal requires (its JSON Patch test)
}

type raceKind int

const (
	raceNone    raceKind = iota // fail with apierrors.NewConflict, nothing sent
	raceBump                    // a concurrent write bumps resourceVersion first
	raceWin                     // another writer makes the same write first
	raceRequest                 // a user writes a new request into the annotation being removed
)

// fault is one conflict, fired once at the first write it matches.
type fault struct {
	name      string
	kind      writeKind
	race      raceKind
	match     func(*write) bool
	recoverOn func(*write) bool // the later successful write that ends it; default match

	at                   *write // the write it fired on
	firedAt, recoveredAt time.Time
	releasedAt           time.Time // the test let the manager go on
	serverErr            error     // what the real server answered (races)
	release              chan struct{}
}

// injector holds the armed faults and hands each fired one to the test
// while the manager waits inside the write, so the test sees the instant.
type injector struct {
	real  client.Client // the concurrent writer
	mu    sync.Mutex
	armed []*fault
	open  []*fault // fired, not yet recovered
	fired chan *fault
}

func newInjector(real client.Client) *injector {
	return &injector{real: real, fired: make(chan *fault, 4)}
}

func (in *injector) arm(f *fault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	f.release = make(chan struct{})
	in.armed = append(in.armed, f)
}

// wrap is a startManager option.
func (in *injector) wrap(r *controller.Reconciler) {
	r.Client = &conflictClient{Client: r.Client, in: in}
}

func (in *injector) intercept(ctx context.Context, w *write, do func() error) error {
	in.mu.Lock()
	var f *fault
	for i, a := range in.armed {
		if a.kind == w.kind && a.match(w) {
			f = a
			in.armed = append(in.armed[:i:i], in.armed[i+1:]...)
			break
		}
	}
	in.mu.Unlock()
	if f == nil {
		err := do()
		if err == nil {
			in.noteSuccess(w)
		}
		return err
	}
	in.mu.Lock()
	f.at, f.firedAt = w, time.Now()
	in.mu.Unlock()
	var err error
	switch f.race {
	case raceNone:
		gr := schema.GroupResource{Resource: string(w.kind)}
		err = apierrors.NewConflict(gr, w.obj.GetName(), fmt.Errorf("injected by the e2e fault matrix at %s", f.name))
	default:
		if cerr := in.concurrent(ctx, f.race, w); cerr != nil {
			err = fmt.Errorf("concurrent writer: %w", cerr)
			f.serverErr = err
			break
		}
		err = do()
		f.serverErr = err
	}
	in.mu.Lock()
	if err == nil {
		f.recoveredAt = f.firedAt // the server accepted it: nothing to recover
	} else {
		in.open = append(in.open, f)
	}
	in.mu.Unlock()
	in.fired <- f
	select {
	case <-f.release:
	case <-ctx.Done():
	case <-time.After(3 * time.Minute):
	}
	in.mu.Lock()
	f.releasedAt = time.Now()
	in.mu.Unlock()
	return err
}

// noteSuccess ends the open faults this successful write recovers from.
func (in *injector) noteSuccess(w *write) {
	in.mu.Lock()
	defer in.mu.Unlock()
	keep := in.open[:0]
	for _, f := range in.open {
		rec := f.recoverOn
		if rec == nil {
			rec = func(w *write) bool { return w.kind == f.kind && f.match(w) }
		}
		if rec(w) {
			f.recoveredAt = time.Now()
			continue
		}
		keep = append(keep, f)
	}
	in.open = keep
}

func (in *injector) hasFired(f *fault) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return !f.firedAt.IsZero()
}

// recovered is how long the manager took to make the write again once
// the test released it (the check at the fault's instant is not counted).
func (in *injector) recovered(f *fault) (time.Duration, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if f.recoveredAt.Equal(f.firedAt) {
		return 0, true // the server accepted the write
	}
	return f.recoveredAt.Sub(f.releasedAt), !f.recoveredAt.IsZero()
}

// concurrent is the other writer: it bumps the object's resourceVersion
// with an unrelated change, or makes the manager's own write first.
func (in *injector) concurrent(ctx context.Context, race raceKind, w *write) error {
	mark := fmt.Sprint(time.Now().UnixNano())
	if race == raceBump {
		live := w.obj.DeepCopyObject().(client.Object)
		if err := in.real.Get(ctx, client.ObjectKeyFromObject(w.obj), live); err != nil {
			return err
		}
		l := live.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["test.rekey.io/concurrent-writer"] = mark
		live.SetLabels(l)
		return in.real.Update(ctx, live)
	}
	if race == raceRequest {
		// The user's new request: the active rotation's ID, as
		// kubectl rekey discard writes it.
		live := &v1.CredentialSet{}
		if err := in.real.Get(ctx, client.ObjectKeyFromObject(w.obj), live); err != nil {
			return err
		}
		for k := range w.dropped {
			live.Annotations[k] = live.Status.RotationID
		}
		return in.real.Update(ctx, live)
	}
	cp := w.obj.DeepCopyObject().(client.Object)
	switch w.kind {
	case kStatus:
		return in.real.Status().Patch(ctx, cp, client.RawPatch(w.patch.Type(), w.body))
	case kDistCreate:
		cp.SetResourceVersion("")
		return in.real.Create(ctx, cp)
	default:
		return in.real.Update(ctx, cp)
	}
}

// conflictClient is the manager's client with the injector in the way.
type conflictClient struct {
	client.Client
	in *injector
}

func (c *conflictClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	w := &write{kind: kOther, obj: obj}
	if s, ok := obj.(*corev1.Secret); ok && s.Namespace != OperatorNamespace {
		w.kind, w.data = kDistCreate, s.Data
	}
	return c.in.intercept(ctx, w, func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c *conflictClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	w := &write{kind: kOther, obj: obj}
	if s, ok := obj.(*corev1.Secret); ok {
		w.kind, w.data = kDistUpdate, s.Data
		if s.Namespace == OperatorNamespace {
			w.kind = kSource
		}
		live := &corev1.Secret{}
		if err := c.in.real.Get(ctx, client.ObjectKeyFromObject(s), live); err == nil {
			w.old = live.Data
		}
	}
	return c.in.intercept(ctx, w, func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c *conflictClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	w := &write{kind: kOther, obj: obj, patch: patch}
	if _, ok := obj.(*v1.CredentialSet); ok {
		w.body, _ = patch.Data(obj)
		var m struct {
			Metadata struct {
				Annotations map[string]*string `json:"annotations"`
			} `json:"metadata"`
		}
		if patch.Type() == types.MergePatchType && json.Unmarshal(w.body, &m) == nil && len(m.Metadata.Annotations) > 0 {
			w.kind, w.dropped = kAnnotation, map[string]bool{}
			for k, v := range m.Metadata.Annotations {
				w.dropped[k] = v == nil
			}
		}
		if patch.Type() == types.JSONPatchType {
			annotationOps(w)
		}
	}
	return c.in.intercept(ctx, w, func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

// annotationOps reads a JSON Patch that removes annotations, each
// guarded by a test of the value it removes.
func annotationOps(w *write) {
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value string `json:"value"`
	}
	if json.Unmarshal(w.body, &ops) != nil {
		return
	}
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	for _, o := range ops {
		k, ok := strings.CutPrefix(o.Path, "/metadata/annotations/")
		if !ok {
			continue
		}
		k = unescape.Replace(k)
		if w.dropped == nil {
			w.kind, w.dropped, w.dropIf = kAnnotation, map[string]bool{}, map[string]string{}
		}
		switch o.Op {
		case "remove":
			w.dropped[k] = true
		case "test":
			w.dropIf[k] = o.Value
		}
	}
}

func (c *conflictClient) Status() client.SubResourceWriter {
	return &conflictStatus{SubResourceWriter: c.Client.Status(), in: c.in}
}

type conflictStatus struct {
	client.SubResourceWriter
	in *injector
}

func (s *conflictStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	w := &write{kind: kOther, obj: obj, patch: patch}
	if cs, ok := obj.(*v1.CredentialSet); ok {
		w.kind, w.before = kStatus, *cs.Status.DeepCopy()
		w.body, _ = patch.Data(obj)
		w.after = statusAfter(patch.Type(), w.body)
	}
	return s.in.intercept(ctx, w, func() error { return s.SubResourceWriter.Patch(ctx, obj, patch, opts...) })
}

// statusAfter is the status a casStatus patch writes: the value of its
// "replace /status" op, or the "status" of the first (merge) write.
func statusAfter(pt types.PatchType, body []byte) v1.CredentialSetStatus {
	var st v1.CredentialSetStatus
	if pt == types.JSONPatchType {
		var ops []struct {
			Op    string          `json:"op"`
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		}
		if json.Unmarshal(body, &ops) == nil {
			for _, o := range ops {
				if o.Op == "replace" && o.Path == "/status" {
					_ = json.Unmarshal(o.Value, &st)
				}
			}
		}
		return st
	}
	var m struct {
		Status v1.CredentialSetStatus `json:"status"`
	}
	_ = json.Unmarshal(body, &m)
	return m.Status
}
