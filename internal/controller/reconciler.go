// Package controller carries out the engine's decisions for CredentialSets
// against Kubernetes and the backend.
package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/leader"
	"rekey.io/rekey/internal/metrics"
	"rekey.io/rekey/internal/reason"
)

// Recorder emits Events (the events.k8s.io recorder of the manager).
type Recorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler rotates the credentials of CredentialSets.
type Reconciler struct {
	Client client.Client
	// APIReader reads live. The set and its Secrets are read live unless
	// the manager's cache is known to hold this manager's own last write
	// of them (freshReads, wired by SetupWithManager).
	APIReader client.Reader
	Recorder  Recorder
	// Namespace holds the source Secrets (the operator's namespace).
	Namespace string
	Now       func() time.Time
	// DefaultGracePeriod applies to AfterRollout without gracePeriod.
	DefaultGracePeriod time.Duration
	// DefaultStuckAfter applies to sets without rotation.stuckAfter; 0
	// turns the RotationStuck signal off for them.
	DefaultStuckAfter time.Duration
	// NamespaceDeletionTimeout is how long a deleted set in a namespace
	// being deleted keeps trying to wind down before it lets go, leaving
	// the backend as it is (0: DefaultNamespaceDeletionTimeout).
	NamespaceDeletionTimeout time.Duration
	// ResyncPeriod re-checks an idle set this often, so that a distribution
	// Secret edited by hand is restored without watching every Secret.
	ResyncPeriod time.Duration
	// InstanceConcurrency bounds how many instances a phase works on at
	// once (1 = one after another).
	InstanceConcurrency int
	// AddressMap, when set, rewrites instance addresses before use. Tests
	// set it because cluster DNS (<pod>.<svc>.<ns>.svc) does not exist on
	// their machine; production leaves it nil.
	AddressMap func(addr string) string
	// Settings are the manager's flags particular to one backend (a
	// program it runs, a namespace another operator keeps its Secrets in):
	// a spec never names them. Each backend registers its own.
	Settings registry.Settings

	// Fence, when set, is asked right before every backend write, and
	// refuses it once this manager is no longer the leader (nil: no
	// leader election, nothing to fence).
	Fence Fence

	// MaxConcurrentReconciles is how many sets are reconciled at once
	// (0: DefaultMaxConcurrentReconciles); sets that share a backend never
	// are (BackendLockKeys).
	MaxConcurrentReconciles int

	// fresh serves the set and its Secrets from the cache once it holds
	// this manager's writes; nil: read live (a reconciler not set up with a
	// manager).
	fresh *freshReads

	locksOnce sync.Once
	locks     *backendLocks
	retries   retries

	// waitNoted: set UID → the rotation whose WaitingForRollout Event was
	// emitted (once per rotation; a restarted manager emits it once more).
	waitNoted sync.Map
}

// Fence says whether this manager may still change a backend.
type Fence interface {
	Check(ctx context.Context) error
	// Term is this manager's leadership term: a backend that records the
	// highest term that changed it refuses a lower one (0: none known).
	Term() int64
}

// fence asks the Fence, if any.
func (r *Reconciler) fence(ctx context.Context) error {
	if r.Fence == nil {
		return nil
	}
	return r.Fence.Check(ctx)
}

// fenceTerm is the Fence's term, 0 without one.
func (r *Reconciler) fenceTerm() int64 {
	if r.Fence == nil {
		return 0
	}
	return r.Fence.Term()
}

// standDown: the Fence refused a backend write, so this manager lost the
// leadership and must write nothing more (no status, no Event); its
// elector ends the process.
func standDown(ctx context.Context, err error) bool {
	if !errors.Is(err, leader.ErrNotLeader) {
		return false
	}
	logFrom(ctx).Info("standing down: this manager is no longer the leader, so it changes nothing", "cause", err.Error())
	return true
}

// consentRecheck is how soon a set refused for a namespace looks again.
const consentRecheck = 30 * time.Second

func logFrom(ctx context.Context) logr.Logger { return log.FromContext(ctx) }

// reads is where the set and its Secrets are read: freshReads, or live.
func (r *Reconciler) reads() *freshReads {
	if r.fresh != nil {
		return r.fresh
	}
	return &freshReads{live: r.APIReader}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// What a paused leader's elector waits for in the end-to-end tests
	// (failpoint ":hold"); nothing in every other build.
	defer failpoint.Reconciling()()
	// One set at a time per backend server; a set that finds its backend
	// busy frees the worker and is queued again when it is released. The
	// lock is tried with the keys of the cached copy first, so that a set
	// that waits costs the API server nothing; the keys of the live read
	// below are what the reconcile holds.
	var keys []string
	cached := &v1.CredentialSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, cached); err == nil {
		keys = BackendLockKeys(cached)
		if !r.waitForBackend(ctx, req, keys) {
			return ctrl.Result{}, nil
		}
	}
	cs := &v1.CredentialSet{}
	if err := r.reads().Get(ctx, req.NamespacedName, cs); err != nil {
		r.lockTable().unlock(req.NamespacedName, keys)
		r.lockTable().forget(req.NamespacedName)
		if apierrors.IsNotFound(err) {
			r.reads().forgetCarried(req.NamespacedName)
			attemptOf(ctx).gone = true
			metrics.Forget(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The set as read: what the backoff keys on and what carry compares
	// the reconcile's last write with (neither changes it).
	read := cs.DeepCopy()
	attemptOf(ctx).set = read
	ctx = withTargetMemo(withSetView(ctx, cs))
	ctx = withBootstrapMemo(ctx, r.reads().takeCarried(cs))
	defer func() { r.fresh.carry(read, attemptOf(ctx).outcome == succeeded, bootstrapMemo(ctx)) }()
	if live := BackendLockKeys(cs); !slices.Equal(live, keys) {
		// The spec moved to other servers since the cache saw it (or the
		// cache has not seen the set yet).
		r.lockTable().unlock(req.NamespacedName, keys)
		if keys = live; !r.waitForBackend(ctx, req, keys) {
			return ctrl.Result{}, nil
		}
	}
	defer r.lockTable().unlock(req.NamespacedName, keys)
	if !cs.DeletionTimestamp.IsZero() {
		res, handled, err := r.deleted(ctx, cs)
		if standDown(ctx, err) {
			return ctrl.Result{}, nil
		}
		if isRace(ctx, err) {
			return ctrl.Result{Requeue: true}, nil
		}
		if handled {
			return res, err
		}
	}
	if phase := firstPhase(cs.Status); phase != cs.Status.Phase {
		if err := r.casStatus(ctx, cs, func(st *v1.CredentialSetStatus) { st.Phase = phase }); err != nil {
			return ctrl.Result{}, err
		}
	}
	// A check request is answered whatever else the set is doing: it
	// changes nothing but status.check.
	if err := r.serveCheck(ctx, cs); err != nil {
		if isRace(ctx, err) {
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, err
	}
	var obs observation
	res, prob, err := r.reconcile(ctx, cs, &obs)
	if standDown(ctx, err) {
		return ctrl.Result{}, nil
	}
	res, prob, err = r.triage(ctx, res, prob, err)
	return r.report(ctx, cs, &obs, res, prob, err)
}

// firstPhase is the phase a set must show before anything else happens: a
// new set is Pending until generation 1 is provisioned (never Idle, so that
// a wait for Idle does not succeed on a set that serves nothing), and so is
// one a manager before Pending existed recorded as Idle with nothing
// provisioned.
func firstPhase(st v1.CredentialSetStatus) v1.RotationPhase {
	if st.KeyGeneration == 0 && st.RotationID == "" && !st.ResetPending && (st.Phase == "" || st.Phase == v1.PhaseIdle) {
		return v1.PhasePending
	}
	if st.Phase == "" {
		return v1.PhaseIdle
	}
	return st.Phase
}

// waitForBackend takes the backend lock on keys for the set, or queues it
// behind the set that holds one of them: false then, and the reconcile
// ends. No timer: a release wakes the first waiter (backendLocks); waiters
// on a timer would come back together, mostly to wait again, and keep a
// manager with many sets on one server busy.
func (r *Reconciler) waitForBackend(ctx context.Context, req ctrl.Request, keys []string) bool {
	busy, ok := r.lockTable().tryLock(req.NamespacedName, keys)
	if !ok {
		logFrom(ctx).V(1).Info("waiting for another set on the same backend", "backend", busy)
	}
	return ok
}

// triage turns an error the user can act on into a problem (reported, and
// retried on a timer rather than with controller-runtime's backoff); other
// errors stay errors, and become a BackendError problem too so that they
// are visible where users look, not only in the manager's log. What it
// found decides how the set is retried (outcomeOf; backedOff applies it).
func (r *Reconciler) triage(ctx context.Context, res ctrl.Result, prob *problem, err error) (ctrl.Result, *problem, error) {
	fromErr := err != nil && prob == nil && !isRace(ctx, err)
	if fromErr {
		prob = classify(err)
		if prob == nil {
			prob = &problem{reason.BackendError, err.Error() + "; " + retryNote}
		} else {
			err = nil
			if res.RequeueAfter == 0 || prob.reason == reason.ClusterUnhealthy {
				// The health gate polls: the phase resumes soon after
				// the cluster is healthy again.
				res.RequeueAfter = 10 * time.Second
			}
			if prob.reason == reason.InstanceUnreachable {
				prob = &problem{prob.reason, prob.message + "; " + retryNote}
			}
			if prob.reason == reason.AuthenticationFailed {
				prob = &problem{prob.reason, prob.message + "; " + refusedNote}
			}
		}
	}
	attemptOf(ctx).outcome = outcomeOf(fromErr, prob, res.RequeueAfter)
	return res, prob, err
}

// report makes what this reconcile saw visible — the problem as a Warning,
// metrics, the RotationStuck signal, status — and says when to come back.
func (r *Reconciler) report(ctx context.Context, cs *v1.CredentialSet, obs *observation, res ctrl.Result, prob *problem, err error) (ctrl.Result, error) {
	if prob != nil {
		metrics.Refused(cs.Namespace, cs.Name, string(prob.reason))
	}
	known := obs.onto(cs.Status)
	metrics.Observe(cs.Namespace, cs.Name, &known)
	metrics.Coverage(cs.Namespace, cs.Name, known.Consumers, cs.Spec.ConsumerGroups)
	insecure := r.transportWarning(cs, obs.transport)
	stuck := r.rotationStuck(cs, known, prob)
	metrics.Stuck(cs.Namespace, cs.Name, stuck.message != "")
	oerr := r.observe(ctx, cs, known, prob, obs.transport, stuck)
	if oerr != nil && err == nil && !isRace(ctx, oerr) {
		err = oerr
	}
	// The Warnings after the write of the conditions they report: no
	// reader sees a Warning while the set still reads healthy. A write
	// lost to a race is redone, with its Warnings, by the next reconcile;
	// one the API server refused leaves the Warning as the only signal.
	if oerr == nil || !isRace(ctx, oerr) {
		if prob != nil && (obs == nil || !obs.saidOnce) {
			r.event(cs, "Warning", prob.reason, "Reconcile", "%s", prob.message)
		}
		if insecure != "" {
			r.event(cs, "Warning", reason.InsecureTransport, "Connect", "%s", insecure)
		}
	}
	if stuck.left > 0 {
		// Wake up when the rotation would count as stuck.
		res = requeueWithin(res, stuck.left)
	}
	if obs != nil && obs.recheck > 0 {
		res = requeueWithin(res, obs.recheck)
	}
	if err == nil && res.RequeueAfter == 0 && r.ResyncPeriod > 0 {
		res.RequeueAfter = r.ResyncPeriod
	}
	if err != nil && isRace(ctx, err) {
		// Expected under concurrency: retried from a fresh read, without
		// an error in the log.
		logFrom(ctx).V(1).Info("retrying after a concurrent change", "cause", err.Error())
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return res, err
}
