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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
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
	// LostHeld are the instances that accepted a lost secret when the
	// restore dropped it, as "instance=secret": those must keep
	// accepting it for a consumer that holds it (noLockout).
	LostHeld []string `json:"lostHeld,omitempty"`
	// Unreset are the rotation's secrets a rollback's reset left on an
	// instance it did not reach (out of the spec, or scaled in), as
	// "instance=secret" (noteUnreset).
	Unreset []string `json:"unreset,omitempty"`
	// RotatedAway are the keys an InPlace rotation replaced (inPlaceWindow).
	RotatedAway []string `json:"away,omitempty"`
	// HandRotated: someone rotated the InPlace entity's key by hand.
	HandRotated bool `json:"hand,omitempty"`
	// Restores counts the restores from backup that changed the source
	// Secret or the status, and a person's deletions of keys from the
	// source Secret as a refusal asks (personEdited): each is a write whose
	// resourceVersion is new on a real server, even back to contents held
	// before (contentVersion).
	Restores int `json:"restores,omitempty"`
	// HandUser: someone changed this RabbitMQ user's (rabbitHandChange),
	// or PostgreSQL login role's (pgHandChange), password by hand, once
	// per path.
	HandUser string `json:"handU,omitempty"`
	// AdminKeyring and RotatorKeyring are the Ceph admin world's stored
	// keyrings (cephadmin.go): Secrets, so a crash keeps them.
	AdminKeyring   string `json:"adminKr,omitempty"`
	RotatorKeyring string `json:"rotKr,omitempty"`
	// Older is the set as it was before the last reconcile that changed
	// its status: what a lagging cache may still hand a manager.
	Older *v1.CredentialSet `json:"older,omitempty"`
	// Gone: the set was deleted and the API server removed it (it had no
	// finalizers left). Set keeps what it was last, for its name, its
	// deletion policy and the traces; nothing reconciles it any more.
	Gone bool `json:"gone,omitempty"`
	// WebGone: the user deleted the consumer's Deployment (and its pod).
	WebGone bool `json:"webGone,omitempty"`
	// Clock is how much time passed since the model's start (only clock
	// transitions move it; everything else happens at one instant).
	Clock time.Duration `json:"clock,omitempty"`
	// Warnings are the Warning Events of the step that made this state
	// ("Reason: message"); not part of its identity.
	Warnings []string `json:"-"`
	// FixedAdmin: the admin rekey connects as is not one of the set's
	// users (its password, fixedAdminPassword, comes from
	// admin.passwordSecretRef and never changes), as a plain StatefulSet's
	// root often is; otherwise it is rotated with the set (MOCO's preset).
	FixedAdmin bool `json:"fa,omitempty"`
	// Waiting are the messages of the step's DeletionWaiting events (a
	// Normal event that names a next step).
	Waiting []string `json:"-"`
	// Switch is the instance a switchover under way promotes ("": none).
	Switch string `json:"sw,omitempty"`
	// Abandoned: a switchover was abandoned half way (failover.go); for
	// a test's proof that it explored one.
	Abandoned bool `json:"ab,omitempty"`
	// Unsafe is what the step's reconcile did while a switchover was
	// under way that must wait for the roles to settle (switchover.go).
	// Part of the state's identity, unlike Warnings: the same state
	// reached without it must not hide it. Empty on the fixed code.
	Unsafe []string `json:"unsafe,omitempty"`
	// Orphan: the consumer's pod has run since a time its Deployment was
	// not in spec.consumers (specedits.go).
	Orphan bool `json:"orphan,omitempty"`
	// Relisted are users the spec lists again and no reconcile has
	// finished since (specedits.go).
	Relisted []string `json:"relisted,omitempty"`
	// EditedAt is the stage of the set the step's spec edit was made at,
	// and the edit (specedits.go); not part of its identity.
	EditedAt string `json:"-"`
	// Peer is the second set of a two-set world (twosets.go): its own
	// set, Secrets, consumer and pod, on this world's instances (it
	// shares Instances; it is nil otherwise). Second marks the peer.
	Peer   *World `json:"peer,omitempty"`
	Second bool   `json:"second,omitempty"`
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

// encode is w's JSON; a peer's instances are w's, written once.
func (w *World) encode() []byte {
	if w.Peer != nil {
		shared := w.Peer.Instances
		w.Peer.Instances = nil
		defer func() { w.Peer.Instances = shared }()
	}
	b, err := json.Marshal(w)
	if err != nil {
		panic(err)
	}
	return b
}

// Clone is a deep copy (a peer's Clone is a world of its own, with a
// copy of the instances).
func (w *World) Clone() *World {
	out := decoded(w.encode()) // clone.go
	out.link()
	return out
}

// Hash identifies the state.
func (w *World) Hash() string {
	sum := sha256.Sum256(w.encode())
	return hex.EncodeToString(sum[:12])
}

// Summary is the state in one line, for traces.
func (w *World) Summary() string {
	st, app := w.Set.Status, w.appKey()
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
		fmt.Fprintf(&b, " source{cur=%s", w.shown(func(k string) string { return string(w.Source.Data[k]) }))
		if p := w.shown(func(k string) string { return string(w.Source.Data[engine.PendingKey(k)]) }); p != "" {
			fmt.Fprintf(&b, " pending=%s/%s", p, w.Source.Data[engine.RotationIDKey])
		}
		b.WriteString("}")
	} else {
		b.WriteString(" source=gone")
	}
	if w.Switch != "" {
		fmt.Fprintf(&b, " switchover-to=%s", w.Switch)
	}
	if w.Dist != nil {
		fmt.Fprintf(&b, " served=%s", w.shown(func(k string) string { return string(w.Dist.Data[k]) }))
	}
	if w.WebGone {
		b.WriteString(" consumer=deleted")
	} else {
		fmt.Fprintf(&b, " pod{holds=%s template=%q rollout=%q}", w.shown(func(k string) string { return w.Pod.Creds[k] }), w.Pod.Template, w.template())
	}
	for _, in := range w.Instances {
		if !in.Present {
			fmt.Fprintf(&b, " %s=away", in.Name)
			continue
		}
		if w.rabbit() || w.ceph() || w.postgres() {
			b.WriteString(" " + rabbitUsers(in))
			continue
		}
		a := in.acct(app)
		fmt.Fprintf(&b, " %s{%s=%s", in.Name, strings.ToLower(strings.TrimSuffix(app, "_PASSWORD")), a.Primary)
		if a.Secondary != "" {
			fmt.Fprintf(&b, "+%s", a.Secondary)
		}
		if !a.Exists {
			b.WriteString("missing")
		}
		if a.Hand {
			b.WriteString(" by hand")
		}
		b.WriteString(roleNote(w, in) + "}")
	}
	b.WriteString(specNote(w))
	if w.Peer != nil {
		b.WriteString(" || " + w.Peer.Set.Name + ": " + w.Peer.Summary())
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
	w := newSetWorld(setName, "uid-1", distName, webName)
	for i, name := range instances {
		// The first instance is the primary; the others replicate from it.
		in := &Instance{Name: name, Present: true, Users: map[string]Account{}}
		if i > 0 {
			in.RO, in.From = true, instances[0]
		}
		for _, k := range modelKeys {
			a := Account{}
			a.create(initial(k))
			in.set(k, a)
		}
		w.Instances = append(w.Instances, in)
	}
	return w
}

// newSetWorld is a world of one set (no instances yet) with one consumer,
// Deployment app/web (one pod), and one distribution Secret, app/dist.
func newSetWorld(name, uid, dist, web string) *World {
	one := int32(1)
	return &World{
		Set: &v1.CredentialSet{
			TypeMeta: metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet"},
			ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: name, UID: types.UID(uid),
				Annotations: map[string]string{Annotation: mysqlWorld}},
			Spec: v1.CredentialSetSpec{
				Distribution: []v1.SecretTarget{{Namespace: appNamespace, Name: dist}},
				Consumers:    []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: web}},
				Rotation:     v1.RotationSpec{DiscardPolicy: v1.DiscardManual},
			},
		},
		Web: &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: web},
			Spec:       appsv1.DeploymentSpec{Replicas: &one},
		},
	}
}

// initial is key's password before rekey: the source Secret is given it
// (adopted), as a user moving an existing cluster under rekey does.
func initial(key string) string { return strings.TrimSuffix(key, "_PASSWORD") + "-0" }

// fixedAdminPassword is the admin's password when FixedAdmin.
var fixedAdminPassword = initial(AdminKey)

// keys are the source Secret keys the set rotates.
func (w *World) keys() []string { return keysOf(w.Set, w.FixedAdmin) }
