package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// observation is what one reconcile measured that status reports but no
// transition decides: how far each consumer moved, what the distribution
// Secrets hold, which backend cluster the set is on, what retiring its old
// credentials waits for, when the policy rotates next, and how the backend
// connects. A field is laid over the status only once it was measured; the
// rest stay as the API server has them.
type observation struct {
	transport transportSeen

	hash string // what the distribution Secrets hold (secretHash); "" until noted

	consumers     []v1.ConsumerStatus
	consumersSeen bool

	cluster string // "" unless the backend cluster was identified

	retirementWaitsFor []string
	retirementSeen     bool

	nextRotationAt *metav1.Time
	policySeen     bool

	waiting     *v1.WaitStatus // what the engine's decision waits for (status.waiting)
	waitingSeen bool

	// recheck: a judgement made now changes by time alone after this
	// long (a rollout held by its owner becomes stuck at stuckAfter),
	// when nothing watched would wake the set; 0: none.
	recheck time.Duration

	// saidOnce: the problem repeats what the Degraded condition already
	// says (a cluster scaled to zero, scaledToZero): no new Warning.
	saidOnce bool
}

// recheckWithin notes that the set must be looked at again within d.
func (o *observation) recheckWithin(d time.Duration) {
	if d > 0 && (o.recheck == 0 || d < o.recheck) {
		o.recheck = d
	}
}

// onto is st as this reconcile knows it: st with what was measured laid
// over it.
func (o *observation) onto(st v1.CredentialSetStatus) v1.CredentialSetStatus {
	if o == nil {
		return st
	}
	if o.hash != "" {
		st.SecretHash = o.hash
	}
	if o.consumersSeen {
		st.Consumers, st.ConsumersUpdated = o.consumers, countRolledOut(o.consumers)
	}
	if o.cluster != "" {
		st.Cluster = o.cluster
	}
	if o.retirementSeen {
		st.RetirementWaitsFor = o.retirementWaitsFor
	}
	if o.policySeen {
		st.NextRotationAt = o.nextRotationAt
	}
	if o.waitingSeen {
		st.Waiting = o.waiting
	}
	return st
}

// setWaiting records the wait this reconcile's decision holds the set in
// (the decision's own, else a due rotation's maintenance window).
func (o *observation) setWaiting(decided, window *v1.WaitStatus) {
	o.waiting, o.waitingSeen = decided, true
	if decided == nil {
		o.waiting = window
	}
}

// setConsumers records the consumers' coverage as measured now.
func (o *observation) setConsumers(c []v1.ConsumerStatus) {
	o.consumers, o.consumersSeen = c, true
}

// turn is one reconcile of a set that has a plan: the set as the API
// server last returned it (each status write refreshes it), the plan for
// its spec, its source Secret as read, and what this reconcile measured.
type turn struct {
	cs  *v1.CredentialSet
	p   *plan
	src *corev1.Secret
	obs *observation

	// Read from src once it is known to hold every current secret.
	cur     engine.Secrets
	pending engine.PendingState
	// outside: the current secrets of keys the spec lists that the
	// rotation in flight did not begin with (engine.OutsideRotation). The
	// plan's backend is narrowed to the rotation's keys; full is the
	// backend before, which serves and repairs these too.
	outside engine.Secrets
	full    engine.Backend
	// unserved: the distribution Secrets could not be brought to what the
	// status says they hold (the backend refuses it), so no consumer is
	// restarted: a pod starting now would read what is about to go, and
	// its rollout would count as done.
	unserved bool
}

// sourceVersion is the source Secret's resourceVersion as read ("" when
// there is none): what makes a restart value new (engine.RollbackRestartID).
func (t *turn) sourceVersion() string {
	if t.src == nil {
		return ""
	}
	return t.src.ResourceVersion
}

// known is the set's status as this reconcile knows it.
func (t *turn) known() v1.CredentialSetStatus { return t.obs.onto(t.cs.Status) }

// writeStatus is a transition: it writes what mutate changes together with
// what this reconcile measured so far, so a crash right after it (or an
// observe that loses a race) loses none of it — the coverage a group's
// acknowledgements built up included.
func (r *Reconciler) writeStatus(ctx context.Context, t *turn, mutate func(*v1.CredentialSetStatus)) error {
	return r.casStatus(ctx, t.cs, func(st *v1.CredentialSetStatus) {
		*st = t.obs.onto(*st)
		mutate(st)
	})
}
