package controller

import (
	"context"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/naming"
)

// consumerIndex maps a workload to the sets that consume it or run on it.
const consumerIndex = "spec.workloads"

func clientKey(cs *v1.CredentialSet) types.NamespacedName {
	return types.NamespacedName{Namespace: cs.Namespace, Name: cs.Name}
}

// CacheByObject keeps the manager's cache lean. Secrets: only those rekey
// writes (its label), in namespaces (all when empty, or the cache's
// default namespaces): the watch that restores a hand-edited distribution
// Secret must never hold every Secret of the cluster in memory, and must
// list only where rekey's RBAC grants Secrets. Reads of Secrets stay live
// (the client does not use this cache for them; the bootstrap, CA and
// adoption Secrets a spec names carry no rekey label and are not in it).
// Workloads: every one is watched, stored without what rekey never reads
// (trimWorkload).
func CacheByObject(namespaces ...string) map[client.Object]cache.ByObject {
	by := secretCache(namespaces...)
	for _, w := range []client.Object{&appsv1.StatefulSet{}, &appsv1.Deployment{}, &appsv1.DaemonSet{}, &batchv1.CronJob{}} {
		by[w] = cache.ByObject{Transform: trimWorkload}
	}
	return by
}

// secretCache is the Secret entry of CacheByObject.
func secretCache(namespaces ...string) map[client.Object]cache.ByObject {
	by := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{naming.ManagedByLabel: naming.ManagedByValue}), Transform: trimForeignSecret}
	if len(namespaces) > 0 {
		by.Namespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			by.Namespaces[ns] = cache.Config{}
		}
	}
	return map[client.Object]cache.ByObject{&corev1.Secret{}: by}
}

// setOfSecret maps a Secret rekey wrote back to its set, when the set is
// one this manager watches (sets, a cache of them) and the Secret carries
// the set's UID: a manager limited to
// some namespaces or labels never reconciles a set outside them because
// a Secret named it, as its watch of sets never would. A set not cached
// yet is queued by its own watch event.
func setOfSecret(sets client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		ns, name, ok := strings.Cut(o.GetAnnotations()[naming.CredentialSetAnnot], "/")
		if !ok || ns == "" || name == "" {
			return nil
		}
		key := types.NamespacedName{Namespace: ns, Name: name}
		cs := &v1.CredentialSet{}
		if err := sets.Get(ctx, key, cs); err != nil {
			return nil
		}
		// Anyone may write that annotation on a Secret of theirs; only the
		// set's UID, which rekey stamps on what it writes, makes the event
		// the set's (a tenant cannot make rekey reconcile, and connect to
		// the backend of, another namespace's set at will).
		if cs.UID == "" || o.GetAnnotations()[naming.CredentialSetUIDAnnot] != string(cs.UID) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: key}}
	}
}

// SetupWithManager registers the reconciler and the watches that wake it:
// its own CredentialSets, the consumer workloads whose rollout gates
// discard, and the Secrets it wrote (a hand edit is undone within seconds).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	// The set and the Secrets rekey wrote are watched, so the cache holds
	// them: read from it once it holds this manager's own writes.
	r.fresh = &freshReads{cache: mgr.GetCache(), live: r.APIReader}
	r.Client = recordingClient{r.Client, r.fresh}
	err := mgr.GetFieldIndexer().IndexField(ctx, &v1.CredentialSet{}, consumerIndex, func(o client.Object) []string {
		cs := o.(*v1.CredentialSet)
		var keys []string
		for _, c := range cs.Spec.Consumers {
			keys = append(keys, ConsumerIndexKey(c.Kind, consumerNamespace(cs, c), c.Name))
		}
		// A StatefulSet the backend reaches its instances through wakes
		// the set too: scaling it from 0 resumes a refused phase at once.
		if e, ok := registry.For(cs); ok && e.StatefulSets != nil {
			for _, name := range e.StatefulSets(cs) {
				keys = append(keys, ConsumerIndexKey(v1.KindStatefulSet, cs.Namespace, name))
			}
		}
		return keys
	})
	if err != nil {
		return err
	}
	mapFor := func(kind v1.ConsumerKind) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var list v1.CredentialSetList
			if err := mgr.GetClient().List(ctx, &list, client.MatchingFields{consumerIndex: ConsumerIndexKey(kind, o.GetNamespace(), o.GetName())}); err != nil {
				return nil
			}
			var reqs []reconcile.Request
			for _, cs := range list.Items {
				reqs = append(reqs, reconcile.Request{NamespacedName: clientKey(&cs)})
			}
			return reqs
		})
	}
	return ctrl.NewControllerManagedBy(mgr).
		// A set's own status writes that only restate what it reports do
		// not wake it (setWakes); backedOff holds a failing one to its backoff.
		For(&v1.CredentialSet{}, builder.WithPredicates(r.setWakes())).
		Watches(&appsv1.StatefulSet{}, mapFor(v1.KindStatefulSet)).
		Watches(&appsv1.Deployment{}, mapFor(v1.KindDeployment)).
		Watches(&appsv1.DaemonSet{}, mapFor(v1.KindDaemonSet)).
		// A CronJob's status.active changes when a Job it made ends.
		Watches(&batchv1.CronJob{}, mapFor(v1.KindCronJob)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(setOfSecret(mgr.GetClient())),
			builder.WithPredicates(r.notOwnWrite())).
		// The keyed lock wakes a set waiting for its backend through the
		// controller's own queue.
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.lockTable().setQueue(q, func(set types.NamespacedName) time.Duration { return r.retries.left(set, r.now()) })
			return nil
		})).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: r.workers()}).
		Named("credentialset").
		Complete(backedOff{r})
}

// notOwnWrite lets through every change of a Secret but the event of
// rekey's own write of it: the reconcile that wrote it already acts on
// what it wrote, and a second one would only read everything again (a hand
// edit or a delete has a version of its own, and still wakes the set).
func (r *Reconciler) notOwnWrite() predicate.Predicate {
	own := func(o client.Object) bool { return r.fresh != nil && r.fresh.ownWrite(o) }
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return !own(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool { return !own(e.ObjectNew) },
	}
}

// workers is MaxConcurrentReconciles, or its default.
func (r *Reconciler) workers() int {
	if r.MaxConcurrentReconciles > 0 {
		return r.MaxConcurrentReconciles
	}
	return DefaultMaxConcurrentReconciles
}
