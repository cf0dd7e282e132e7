package explorer

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clienttesting "k8s.io/client-go/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// kube builds the fake API server holding w's objects. The consumer's
// Deployment status says its rollout is done exactly when its pod runs the
// template's restart value.
func (w *World) kube() client.Client {
	// The consumers' namespace, not terminating: a set deleted in a
	// terminating namespace winds down at once (a path of its own).
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNamespace}}
	objs := []client.Object{w.Set.DeepCopy(), ns}
	if !w.WebGone {
		objs = append(objs, w.deployment())
	}
	if w.Source != nil {
		src := w.Source.DeepCopy()
		src.ResourceVersion = contentVersion(src.Data, w.Restores)
		objs = append(objs, src)
	}
	if w.Dist != nil {
		objs = append(objs, w.Dist.DeepCopy())
	}
	// A tracker without managed fields: the default one builds a REST
	// mapper of the whole scheme on every write, most of a step's time.
	tracker := clienttesting.NewObjectTracker(theScheme(), serializer.NewCodecFactory(theScheme()).UniversalDecoder())
	return fakeclient.NewClientBuilder().WithScheme(theScheme()).WithObjectTracker(tracker).WithObjects(objs...).
		WithStatusSubresource(&v1.CredentialSet{}, &appsv1.Deployment{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				if done, err := setPatch(ctx, c, tracker, obj, p, len(opts), false); done {
					return err
				}
				return asServer(c.Patch(ctx, obj, p, opts...))
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if sub == "status" {
					if done, err := setPatch(ctx, c, tracker, obj, p, len(opts), true); done {
						return err
					}
				}
				return asServer(c.SubResource(sub).Patch(ctx, obj, p, opts...))
			},
		}).Build()
}

// asServer answers a JSON Patch whose "test" op does not hold as the API
// server does (apiserver's patch.go: a bare 422, no kind, no name, no
// causes; controller TestRaceOrRejection holds rekey to reading it as a
// lost race), where the fake client returns json-patch's plain error: a
// reconcile from a stale read then stops as on a real server, its
// Warnings unsent.
func asServer(err error) error {
	var st apierrors.APIStatus
	if err == nil || errors.As(err, &st) || !strings.Contains(err.Error(), "test failed") {
		return err
	}
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
}

func (w *World) deployment() *appsv1.Deployment {
	d := w.Web.DeepCopy()
	d.Generation, d.Status = 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if w.template() != w.Pod.Template {
		// The Deployment controller has not rolled the new template out:
		// the old pod runs, with what it read when it started.
		d.Generation, d.Status.UpdatedReplicas = 2, 0
	}
	return d
}

// read takes the objects back from the fake API server after a step.
func (w *World) read(kc client.Client) {
	ctx := context.Background()
	cs := &v1.CredentialSet{}
	if err := kc.Get(ctx, client.ObjectKeyFromObject(w.Set), cs); apierrors.IsNotFound(err) && w.deleted() {
		// Its last finalizer went: the API server removed it.
		w.Gone, w.Set.Finalizers = true, nil
		cs = w.Set
	} else if err != nil {
		panic(err)
	}
	for i := range cs.Status.Conditions {
		// Stamped with the wall clock where the controller leaves it
		// zero: equal states must hash equal.
		cs.Status.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	w.Set = clean(cs).(*v1.CredentialSet)
	w.Source = readSecret(kc, opNamespace, naming.SourceSecretName(w.Set))
	w.Dist = readSecret(kc, appNamespace, w.Set.Spec.Distribution[0].Name)
	if w.WebGone {
		return
	}
	d := &appsv1.Deployment{}
	if err := kc.Get(ctx, client.ObjectKeyFromObject(w.Web), d); err != nil {
		panic(err)
	}
	d.Status = appsv1.DeploymentStatus{}
	d.Generation = 0
	w.Web = clean(d).(*appsv1.Deployment)
}

// contentVersion stands for the source Secret's resourceVersion, which
// the API server makes new on every write (a restore's too), and which
// rekey's restart values carry (engine.DistributedRestartID): a number
// drawn from what the Secret holds and how many restores from backup the
// world has seen. The World keeps no version of its own (a counter of
// every write would make every state after a write new to the explorer);
// contents that differ get versions that differ, and so do the same
// contents before and after a restore (a restore brings back the status
// that recorded which requests ran, so a request taken again there must
// not find its old restart value: a real server's version would be new).
// Another write back to contents held before gets the version they had,
// where a real server's would be new: the model can find a restart value
// taken again where a real server would not, never miss one.
func contentVersion(data map[string][]byte, restores int) string {
	h := fnv.New64a()
	h.Write([]byte(strconv.Itoa(restores)))
	h.Write([]byte{0})
	for _, k := range slices.Sorted(maps.Keys(data)) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(data[k])
		h.Write([]byte{0})
	}
	return strconv.FormatUint(h.Sum64()%1e15+1000, 10)
}

func readSecret(kc client.Client, ns, name string) *corev1.Secret {
	s := &corev1.Secret{}
	if err := kc.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		return nil
	}
	return clean(s).(*corev1.Secret)
}

// clean drops what the API server keeps for itself, so that equal
// contents hash equal.
func clean(o client.Object) client.Object {
	o.SetResourceVersion("")
	o.SetManagedFields(nil)
	o.SetCreationTimestamp(metav1.Time{})
	return o
}

// recorder keeps the Warning Events of one step, and its DeletionWaiting
// events.
type recorder struct{ warnings, waiting []string }

func (r *recorder) Eventf(_ runtime.Object, _ runtime.Object, eventtype, why, _ string, note string, args ...any) {
	switch {
	case eventtype == corev1.EventTypeWarning:
		r.warnings = append(r.warnings, why+": "+fmt.Sprintf(note, args...))
	case why == string(reason.DeletionWaiting):
		r.waiting = append(r.waiting, why+": "+fmt.Sprintf(note, args...))
	}
}

// crashed is the panic a failpoint raises to crash the manager.
type crashed struct{ at string }

// Reconcile runs one reconcile of the real controller on w (a manager
// that starts with an empty cache: nothing is kept between reconciles).
// With crashAt set ("step#n"), the manager dies at that failpoint's n-th
// hit; hit
// says which failpoints the reconcile passed, in order.
func (w *World) Reconcile(crashAt string) (hit []string, err error) {
	return w.reconcile(crashAt, nil)
}

// ReconcileStale is Reconcile by a manager that reads the set as it was
// before its last status change (w.Older).
func (w *World) ReconcileStale() error {
	if w.Older == nil {
		return nil
	}
	_, err := w.reconcile("", w.Older)
	return err
}

// staleReader hands out set instead of the CredentialSet the API server
// holds.
type staleReader struct {
	client.Reader
	set *v1.CredentialSet
}

func (s staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if cs, ok := obj.(*v1.CredentialSet); ok {
		s.set.DeepCopyInto(cs)
		cs.ResourceVersion = "1" // older than anything the fake client wrote
		return nil
	}
	return s.Reader.Get(ctx, key, obj, opts...)
}

func (w *World) reconcile(crashAt string, stale *v1.CredentialSet) (hit []string, err error) {
	if w.Gone {
		w.Warnings, w.Waiting = nil, nil
		return nil, nil // nothing left to reconcile
	}
	kc := w.kube()
	rec := &recorder{}
	var reader client.Reader = kc
	if stale != nil {
		reader = staleReader{kc, stale}
	}
	before := w.Set.DeepCopy()
	r := &controller.Reconciler{Client: kc, APIReader: reader, Recorder: rec, Namespace: opNamespace,
		Now: func() time.Time { return now.Add(w.Clock) }}
	active, w.Unsafe = w, nil
	count := map[string]int{}
	failpoint.Crash = func(name string) {
		hit = append(hit, name)
		count[name]++
		if fmt.Sprintf("%s#%d", name, count[name]) == crashAt {
			panic(crashed{name})
		}
	}
	defer func() {
		failpoint.Crash, active = nil, nil
		crash := false
		if p := recover(); p != nil {
			if _, ok := p.(crashed); !ok {
				panic(p)
			}
			err, crash = errCrashed, true
		} else {
			w.Relisted = nil // the set's next reconcile after they were listed again has run
		}
		w.read(kc)
		if !crash && !w.Gone {
			for _, in := range w.Instances {
				// The set's next reconcile after the return has run, and
				// reached it: one that did not answer was not repaired. A
				// reconcile that let the set go (deletionPolicy Retain)
				// repaired nothing, and none follows: what the instance
				// holds stays the user's doing.
				if !in.Down {
					in.Returned = in.Returned && w.Second
					in.Returned2 = in.Returned2 && !w.Second
				}
			}
		}
		w.Warnings = rec.warnings
		if sameStage(before.Status, w.Set.Status) {
			// Said of the state before the reconcile; still true of
			// this one only if the reconcile moved nothing on.
			w.Waiting = rec.waiting
		}
		noteStarts(w, before.Status)
		if !equality.Semantic.DeepEqual(before.Status, w.Set.Status) {
			w.Older = before
		}
	}()
	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(w.Set)})
	return hit, err
}

var errCrashed = errors.New("manager crashed")

// sameStage: a and b are at the same step of the same rotation.
func sameStage(a, b v1.CredentialSetStatus) bool {
	return a.Phase == b.Phase && a.RotationID == b.RotationID && a.RotateApplied == b.RotateApplied &&
		a.DiscardStarted == b.DiscardStarted && a.DiscardApplied == b.DiscardApplied && a.ResetPending == b.ResetPending
}
