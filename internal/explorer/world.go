// Package explorer is a state-space explorer (a model checker) for rekey:
// it drives the real engine and the real controller Reconciler through
// every transition a world of users, crashes, consumers and MySQL
// instances can make, breadth first with state hashing and by seeded
// random walks, and checks in every state the rules that must hold at
// every instant (no lockout, nothing lost, no dead end, no wedge). A
// violation is reported with the shortest trace from the start.
//
// The Kubernetes side is controller-runtime's fake client, rebuilt for
// each step from the World; the MySQL side is a model of instances and
// their users (mysqlmodel.go) behind the MySQL backend's decisions.
package explorer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// Where the model's objects live.
const (
	opNamespace  = "rekey-system"
	appNamespace = "app"
	setName      = "db"
	distName     = "db-creds"
	webName      = "web"
)

// Pod is the consumer's one pod: it read the distribution Secret when it
// started and keeps what it read until restarted (Creds), and it runs the
// pod template whose restart annotation was Template.
type Pod struct {
	Template string            `json:"t,omitempty"`
	Creds    map[string]string `json:"c,omitempty"`
}

// Backup is what a restore from backup brings back: the set's status and
// its source Secret's data, as they were when it was taken.
type Backup struct {
	Status v1.CredentialSetStatus `json:"st"`
	Source map[string][]byte      `json:"src"`
}

// World is one state: everything a transition reads or changes. Its JSON
// is its identity (hash).
type World struct {
	Set       *v1.CredentialSet  `json:"set"`
	Source    *corev1.Secret     `json:"src,omitempty"`
	Dist      *corev1.Secret     `json:"dist,omitempty"`
	Web       *appsv1.Deployment `json:"web"`
	Pod       Pod                `json:"pod"`
	Instances []*Instance        `json:"inst"`
	Backup    *Backup            `json:"bak,omitempty"`
	// Lost are secrets a restore from backup dropped from the source
	// Secret.
	Lost []string `json:"lost,omitempty"`
	// Older is the set as it was before the last reconcile that changed
	// its status: what a lagging cache may still hand a manager.
	Older *v1.CredentialSet `json:"older,omitempty"`
	// Gone: the set was deleted and the API server removed it (it had no
	// finalizers left). Set keeps what it was last, for its name, its
	// deletion policy and the traces; nothing reconciles it any more.
	Gone bool `json:"gone,omitempty"`
	// WebGone: the user deleted the consumer's Deployment (and its pod).
	WebGone bool `json:"webGone,omitempty"`
	// Warnings are the Warning Events of the step that made this state
	// ("Reason: message"); not part of its identity.
	Warnings []string `json:"-"`
	// Waiting are the messages of the step's DeletionWaiting events (a
	// Normal event that names a next step).
	Waiting []string `json:"-"`
}

// deleted: the user deleted the set (it may still be there, held by
// rekey's finalizers).
func (w *World) deleted() bool {
	return w.Gone || !w.Set.DeletionTimestamp.IsZero()
}

func (w *World) present() []*Instance {
	var out []*Instance
	for _, in := range w.Instances {
		if in.Present {
			out = append(out, in)
		}
	}
	return out
}

func (w *World) instance(name string) *Instance {
	for _, in := range w.Instances {
		if in.Name == name {
			return in
		}
	}
	return nil
}

// Clone is a deep copy.
func (w *World) Clone() *World {
	b, err := json.Marshal(w)
	if err != nil {
		panic(err)
	}
	out := &World{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

// Hash identifies the state.
func (w *World) Hash() string {
	b, err := json.Marshal(w)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// Summary is the state in one line, for traces.
func (w *World) Summary() string {
	st := w.Set.Status
	var b strings.Builder
	switch {
	case w.Gone:
		fmt.Fprintf(&b, "set GONE (deletionPolicy %s) ", w.Set.Spec.OnDeletion())
	case w.deleted():
		fmt.Fprintf(&b, "set DELETED (deletionPolicy %s, finalizers %v) ", w.Set.Spec.OnDeletion(), w.Set.Finalizers)
	case w.Set.Spec.DeletionPolicy != "":
		fmt.Fprintf(&b, "deletionPolicy=%s ", w.Set.Spec.DeletionPolicy)
	}
	fmt.Fprintf(&b, "phase=%s gen=%d", st.Phase, st.KeyGeneration)
	if st.RotationID != "" {
		fmt.Fprintf(&b, " rotation=%s", st.RotationID)
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{st.RotateApplied, "applied"}, {st.DiscardStarted, "discardStarted"}, {st.DiscardApplied, "discardApplied"}, {st.ResetPending, "resetPending"}} {
		if f.on {
			b.WriteString(" " + f.name)
		}
	}
	if st.RestartID != "" {
		fmt.Fprintf(&b, " restartID=%s", st.RestartID)
	}
	var anns []string
	for k, v := range w.Set.Annotations {
		if strings.HasPrefix(k, "rekey.io/") {
			anns = append(anns, strings.TrimPrefix(k, "rekey.io/")+"="+v)
		}
	}
	sort.Strings(anns)
	if len(anns) > 0 {
		fmt.Fprintf(&b, " requests=%v", anns)
	}
	if w.Source != nil && len(w.Source.Data) == 0 {
		b.WriteString(" source=emptied")
	} else if w.Source != nil {
		fmt.Fprintf(&b, " source{cur=%s", w.Source.Data[AppKey])
		if p := w.Source.Data[engine.PendingKey(AppKey)]; len(p) > 0 {
			fmt.Fprintf(&b, " pending=%s/%s", p, w.Source.Data[engine.RotationIDKey])
		}
		b.WriteString("}")
	} else {
		b.WriteString(" source=gone")
	}
	if w.Dist != nil {
		fmt.Fprintf(&b, " served=%s", w.Dist.Data[AppKey])
	}
	if w.WebGone {
		b.WriteString(" consumer=deleted")
	} else {
		fmt.Fprintf(&b, " pod{holds=%s template=%q rollout=%q}", w.Pod.Creds[AppKey], w.Pod.Template, w.template())
	}
	for _, in := range w.Instances {
		if !in.Present {
			fmt.Fprintf(&b, " %s=away", in.Name)
			continue
		}
		a := in.acct(AppKey)
		fmt.Fprintf(&b, " %s{app=%s", in.Name, a.Primary)
		if a.Secondary != "" {
			fmt.Fprintf(&b, "+%s", a.Secondary)
		}
		if !a.Exists {
			b.WriteString("missing")
		}
		if a.Hand {
			b.WriteString(" by hand")
		}
		b.WriteString("}")
	}
	return b.String()
}

// template is the restart value on the consumer's pod template.
func (w *World) template() string {
	if w.WebGone {
		return ""
	}
	return w.Web.Spec.Template.Annotations[naming.RestartAnnotation(w.Set)]
}

// The controller logs at every reconcile; the explorer runs millions.
func init() { ctrllog.SetLogger(logr.Discard()) }

var (
	schemeOnce sync.Once
	scheme     *runtime.Scheme
)

func theScheme() *runtime.Scheme {
	schemeOnce.Do(func() {
		scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			panic(err)
		}
		if err := v1.AddToScheme(scheme); err != nil {
			panic(err)
		}
	})
	return scheme
}

// now is the model's clock: time never passes, so the grace period and
// backoffs are decided the same way in every state.
var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewWorld is a set with one consumer (Deployment app/web, one pod) on a
// MySQL cluster of the given instances, whose users already exist with
// the passwords the set adopts (MOCO made them), before provisioning.
func NewWorld(instances ...string) *World {
	one := int32(1)
	w := &World{
		Set: &v1.CredentialSet{
			TypeMeta: metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet"},
			ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: setName, UID: "uid-1",
				Annotations: map[string]string{Annotation: "model"}},
			Spec: v1.CredentialSetSpec{
				Distribution: []v1.SecretTarget{{Namespace: appNamespace, Name: distName}},
				Consumers:    []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: webName}},
				Rotation:     v1.RotationSpec{DiscardPolicy: v1.DiscardManual},
			},
		},
		Web: &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: webName},
			Spec:       appsv1.DeploymentSpec{Replicas: &one},
		},
	}
	for _, name := range instances {
		in := &Instance{Name: name, Present: true, Users: map[string]Account{}}
		for _, k := range modelKeys {
			a := Account{}
			a.create(initial(k))
			in.set(k, a)
		}
		w.Instances = append(w.Instances, in)
	}
	return w
}

// initial is key's password before rekey: the source Secret is given it
// (adopted), as a user moving an existing cluster under rekey does.
func initial(key string) string { return strings.TrimSuffix(key, "_PASSWORD") + "-0" }

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
		objs = append(objs, w.Source.DeepCopy())
	}
	if w.Dist != nil {
		objs = append(objs, w.Dist.DeepCopy())
	}
	// A tracker without managed fields: the default one builds a REST
	// mapper of the whole scheme on every write, most of a step's time.
	tracker := clienttesting.NewObjectTracker(theScheme(), serializer.NewCodecFactory(theScheme()).UniversalDecoder())
	return fakeclient.NewClientBuilder().WithScheme(theScheme()).WithObjectTracker(tracker).WithObjects(objs...).
		WithStatusSubresource(&v1.CredentialSet{}, &appsv1.Deployment{}).Build()
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
	w.Dist = readSecret(kc, appNamespace, distName)
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
		Now: func() time.Time { return now }}
	active = w
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
		if p := recover(); p != nil {
			if _, ok := p.(crashed); !ok {
				panic(p)
			}
			err = errCrashed
		}
		w.read(kc)
		w.Warnings = rec.warnings
		if sameStage(before.Status, w.Set.Status) {
			// Said of the state before the reconcile; still true of
			// this one only if the reconcile moved nothing on.
			w.Waiting = rec.waiting
		}
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
