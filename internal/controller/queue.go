package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/metrics"
)

// setUpdateWakes decides whether a change of a set queues it. A person's
// change does (spec, annotations such as rekey.io/rotate, labels,
// finalizers, a deletion), and so does a status write that moved the set
// on (a phase, a generation, a consumer that rolled out): its next step is
// due now. A status write that changed only what the set reports (its
// conditions) does not: that is what a failing attempt writes, and waking
// on it made each failure start the next attempt at once.
func setUpdateWakes(old, cur *v1.CredentialSet) bool {
	if old.Generation != cur.Generation || !cur.DeletionTimestamp.IsZero() ||
		!equality.Semantic.DeepEqual(old.Annotations, cur.Annotations) ||
		!equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
		!equality.Semantic.DeepEqual(old.Finalizers, cur.Finalizers) {
		return true
	}
	return !equality.Semantic.DeepEqual(progressOf(old.Status), progressOf(cur.Status))
}

// progressOf is a status without what a reconcile only reports.
func progressOf(st v1.CredentialSetStatus) v1.CredentialSetStatus {
	st.Conditions, st.ObservedGeneration, st.Check = nil, 0, nil
	return st
}

// setWakes is setUpdateWakes as the predicate of the set's own watch,
// less the changes a later write of this manager's supersedes (wokenLater).
func (r *Reconciler) setWakes() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, ok1 := e.ObjectOld.(*v1.CredentialSet)
		cur, ok2 := e.ObjectNew.(*v1.CredentialSet)
		if !ok1 || !ok2 {
			return true
		}
		return setUpdateWakes(old, cur) && !(r.fresh != nil && r.fresh.wokenLater(cur))
	}}
}

// attempt is what one reconcile found, for backedOff.
type attempt struct {
	set     *v1.CredentialSet // as the reconcile read it; nil: not read
	gone    bool              // the set does not exist
	outcome outcome
}

type attemptKey struct{}

func withAttempt(ctx context.Context, a *attempt) context.Context {
	return context.WithValue(ctx, attemptKey{}, a)
}

func attemptOf(ctx context.Context) *attempt {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	if a == nil {
		return &attempt{}
	}
	return a
}

// backedOff is the reconciler as the manager's queue runs it: the backoff of
// a failing set holds whatever wakes it, and a failure is retried after
// the set's backoff instead of at once (Reconcile itself, as tests and the
// explorer call it, reports each failure and returns its error).
type backedOff struct{ r *Reconciler }

func (q backedOff) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r := q.r
	cached := &v1.CredentialSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, cached); err == nil {
		if left := r.retries.holding(req.NamespacedName, cached, r.now()); left > 0 {
			// Woken early (a consumer's rollout, a Secret, its backend
			// released): not tried before its backoff ends. A wake-up for
			// a free backend it was given passes on to the next set.
			r.lockTable().forget(req.NamespacedName)
			return ctrl.Result{RequeueAfter: left}, nil
		}
	}
	a := &attempt{}
	res, err := r.Reconcile(withAttempt(ctx, a), req)
	switch {
	case a.gone:
		r.retries.reset(req.NamespacedName)
	case a.set == nil || a.outcome == untried:
		// It waits for its backend, or is being deleted: its backoff
		// stays as it is.
	case a.outcome == failed:
		wait, n := r.retries.fail(req.NamespacedName, a.set, r.now())
		metrics.Failures(req.Namespace, req.Name, n)
		if err != nil {
			// Said once per attempt; the attempts are spaced by the backoff.
			logFrom(ctx).Error(err, "reconcile failed; retrying after the backoff", "retryIn", wait.String(), "failuresInARow", n)
		}
		return ctrl.Result{RequeueAfter: wait}, nil
	case a.outcome == refused:
		wait := r.retries.holdForPerson(req.NamespacedName, a.set, r.now())
		metrics.Failures(req.Namespace, req.Name, 1)
		return ctrl.Result{RequeueAfter: wait}, nil
	case a.outcome == succeeded:
		r.retries.reset(req.NamespacedName)
		metrics.Failures(req.Namespace, req.Name, 0)
	}
	return res, err
}
