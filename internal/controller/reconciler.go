// Package controller carries out the engine's decisions for CredentialSets
// against Kubernetes and the backend.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/metrics"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// Recorder emits Events (the events.k8s.io recorder of the manager).
type Recorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler rotates the credentials of CredentialSets.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader // live reads: the set and its Secrets must never be stale
	Recorder  Recorder
	// Namespace holds the source Secrets (the operator's namespace).
	Namespace string
	Now       func() time.Time
	// DefaultGracePeriod applies to AfterRollout without gracePeriod.
	DefaultGracePeriod time.Duration
	// DefaultStuckAfter applies to sets without rotation.stuckAfter; 0
	// turns the RotationStuck signal off for them.
	DefaultStuckAfter time.Duration
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
	// CephWorkDir is where the Ceph backend writes the ceph.conf and
	// keyring files of one command (mode 0600, removed after); default the
	// system temporary directory.
	CephWorkDir string
	// CephCLI is the ceph CLI the Ceph backend runs (a manager flag: a
	// spec never names a program); default "ceph" from PATH.
	CephCLI string
	// MOCONamespace is MOCO's namespace, where its controller Secrets are
	// (a manager flag: a spec never names it); empty, rekey serves no
	// MOCO cluster.
	MOCONamespace string

	// MaxConcurrentReconciles is how many sets are reconciled at once
	// (0: DefaultMaxConcurrentReconciles); sets that share a backend never
	// are (BackendLockKeys).
	MaxConcurrentReconciles int

	locksOnce sync.Once
	locks     *backendLocks
	streaks   unreachableStreaks

	// waitNoted: set UID → the rotation whose WaitingForRollout Event was
	// emitted (once per rotation; a restarted manager emits it once more).
	waitNoted sync.Map
}

// consentRecheck is how soon a set refused for a namespace looks again.
const consentRecheck = 30 * time.Second

func logFrom(ctx context.Context) logr.Logger { return log.FromContext(ctx) }

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) event(cs *v1.CredentialSet, typ string, why reason.Reason, action, msg string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(cs, nil, typ, string(why), action, msg, args...)
	}
}

// rotationEvent emits an Event that belongs to rotation id (its note names
// the id). The events.k8s.io recorder folds Events it deems the same —
// same type, reason, action, regarding and related object — into one
// series that keeps the first note; the related reference names the
// rotation, so the Events of one rotation are never folded into another's
// (RotationStarted, PolicyTriggered of the next rotation stay visible).
func (r *Reconciler) rotationEvent(cs *v1.CredentialSet, id, typ string, why reason.Reason, action, msg string, args ...any) {
	if r.Recorder == nil {
		return
	}
	related := &corev1.ObjectReference{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet",
		Namespace: cs.Namespace, Name: cs.Name, UID: cs.UID, FieldPath: "rotation:" + id}
	r.Recorder.Eventf(cs, related, typ, string(why), action, msg, args...)
}

// noteWaiting emits WaitingForRollout once per rotation (not on every
// 15 s requeue): the first time the discard waits for the consumers.
func (r *Reconciler) noteWaiting(cs *v1.CredentialSet, d engine.Decision) {
	id := cs.Status.RotationID
	if cs.Status.ResetPending {
		id = "reset:" + cs.Status.LastRotationID
	}
	if prev, ok := r.waitNoted.Swap(cs.UID, id); ok && prev == id {
		return
	}
	var waiting []string
	for _, c := range cs.Status.Consumers {
		if !c.RolledOut {
			waiting = append(waiting, strings.TrimPrefix(string(c.Kind)+" "+strings.TrimPrefix(c.Namespace+"/"+c.Name, "/"), " "))
		}
	}
	what := "every consumer"
	if len(waiting) > 0 {
		what = strings.Join(waiting, ", ")
	}
	if cs.Status.ResetPending {
		r.rotationEvent(cs, id, "Normal", reason.WaitingForRollout, "Reset", "rollback of rotation %s: waiting for %s to roll out the current credentials again before every instance is reset", cs.Status.LastRotationID, what)
		return
	}
	r.rotationEvent(cs, id, "Normal", reason.WaitingForRollout, "Discard", "rotation %s: waiting for %s to roll out the new credentials before the old ones are discarded (checked every %s; status.consumers says what each waits for)", id, what, d.Requeue)
}

// problem is what stopped this reconcile; it becomes the Degraded
// condition and a Warning Event.
type problem struct {
	reason  reason.Reason
	message string
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cs := &v1.CredentialSet{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, cs); err != nil {
		r.lockTable().forget(req.NamespacedName)
		r.streaks.reset(req.NamespacedName)
		if apierrors.IsNotFound(err) {
			metrics.Forget(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = withSetView(ctx, cs)
	// One set at a time per backend server; a set that finds its backend
	// busy frees the worker and is queued again when it is released.
	keys := BackendLockKeys(cs)
	if busy, ok := r.lockTable().tryLock(req.NamespacedName, keys); !ok {
		logFrom(ctx).V(1).Info("waiting for another set on the same backend", "backend", busy)
		// No timer: a release wakes the first waiter (backendLocks);
		// waiters on a timer would come back together, mostly to wait
		// again, and keep a manager with many sets on one server busy.
		return ctrl.Result{}, nil
	}
	defer r.lockTable().unlock(req.NamespacedName, keys)
	if !cs.DeletionTimestamp.IsZero() {
		if !slices.ContainsFunc(cs.Finalizers, isRekeyFinalizer) {
			return ctrl.Result{}, nil
		}
		res, err := r.finalize(ctx, cs)
		if isRace(ctx, err) {
			return ctrl.Result{Requeue: true}, nil
		}
		return res, err
	}
	if cs.Status.Phase == "" {
		if err := r.casStatus(ctx, cs, func(st *v1.CredentialSetStatus) { st.Phase = v1.PhaseIdle }); err != nil {
			return ctrl.Result{}, err
		}
	}
	var seen transportSeen
	res, prob, err := r.reconcile(ctx, cs, &seen)
	if err != nil && prob == nil && !isRace(ctx, err) {
		prob = classify(err)
		if prob == nil {
			// Still retried with backoff, but visible where users look,
			// not only in the manager's log.
			prob = &problem{reason.BackendError, err.Error() + "; rekey retries with backoff"}
		} else {
			err = nil // reported as an event + condition, retried below
			if res.RequeueAfter == 0 || prob.reason == reason.ClusterUnhealthy {
				// The health gate polls: the phase resumes soon after
				// the cluster is healthy again.
				res.RequeueAfter = 10 * time.Second
			}
			if prob.reason == reason.InstanceUnreachable {
				prob, res.RequeueAfter = r.backoff(req.NamespacedName, prob)
			}
		}
	}
	r.endStreak(req.NamespacedName, prob)
	if prob != nil {
		r.event(cs, "Warning", prob.reason, "Reconcile", "%s", prob.message)
		metrics.Refused(cs.Namespace, cs.Name, string(prob.reason))
	}
	metrics.Observe(cs.Namespace, cs.Name, &cs.Status)
	metrics.Coverage(cs.Namespace, cs.Name, cs.Status.Consumers, cs.Spec.ConsumerGroups)
	r.noteTransport(cs, seen)
	stuck := r.rotationStuck(cs, prob)
	metrics.Stuck(cs.Namespace, cs.Name, stuck.message != "")
	if oerr := r.observe(ctx, cs, prob, seen, stuck); oerr != nil && err == nil && !isRace(ctx, oerr) {
		err = oerr
	}
	if stuck.left > 0 && (res.RequeueAfter == 0 || stuck.left < res.RequeueAfter) {
		// Wake up when the rotation would count as stuck.
		res.RequeueAfter = stuck.left
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

// isRace: another writer (or a shutdown) got there first; the next
// reconcile starts from a fresh read, so there is nothing to report.
func isRace(ctx context.Context, err error) bool {
	return errors.Is(err, errStale) || apierrors.IsConflict(err) || ctx.Err() != nil
}

// classify turns errors the user can act on into problems; others are
// returned to controller-runtime for backoff.
func classify(err error) *problem {
	if u, ok := engine.AsUnreachable(err); ok {
		return &problem{reason.InstanceUnreachable, fmt.Sprintf(
			"instance %s is unreachable, so this phase is on hold (nothing is lost; it resumes by itself when the instance answers): %v", u.Instance, u.Err)}
	}
	if rf, ok := engine.AsRefusal(err); ok {
		return &problem{reason.Reason(rf.Reason), rf.Message}
	}
	var se *errSpec
	if errors.As(err, &se) {
		return &problem{reason.InvalidSpec, se.Msg + "; fix the CredentialSet spec"}
	}
	if apierrors.IsInvalid(err) && !errors.Is(err, errStale) {
		// Not a lost race (those are errStale): the API server refused
		// the write itself, and would refuse it again at once.
		return &problem{reason.WriteRejected, truncate(
			"the Kubernetes API server rejected a write of rekey as invalid (a validation failure or an admission policy); nothing was changed by it and rekey retries every 10 s: check admission policies and webhooks that match CredentialSets or Secrets, and report the message if none applies: "+err.Error(), 2048)}
	}
	return nil
}

// truncate bounds a message that ends up in a condition (whose message
// the API server limits): a rejection caused by an oversized message must
// not make the Degraded condition oversized too.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func (r *Reconciler) reconcile(ctx context.Context, cs *v1.CredentialSet, seen *transportSeen) (ctrl.Result, *problem, error) {
	if prob, err := r.checkNamespaces(ctx, cs); err != nil || prob != nil {
		// Consent is granted on the Namespace, which rekey does not watch.
		return ctrl.Result{RequeueAfter: consentRecheck}, prob, err
	}
	p, err := r.planFor(ctx, cs)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	*seen = transportOf(p.backend)
	if err := r.syncFinalizers(ctx, cs, p); err != nil {
		return ctrl.Result{}, nil, err
	}
	keys := p.backend.Keys()
	src, err := r.getSourceSecret(ctx, cs)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	if cs.Status.KeyGeneration == 0 {
		return ctrl.Result{}, nil, r.provision(ctx, cs, p, src)
	}
	if src == nil {
		return ctrl.Result{}, &problem{reason.MissingRotationPending, fmt.Sprintf(
			"source Secret %s/%s is gone, and with it the only copy of the current secrets; restore it from backup (rekey never recreates it, to avoid locking consumers out)", r.Namespace, naming.SourceSecretName(cs))}, nil
	}
	cur, missing := engine.Current(src.Data, keys)
	if len(missing) > 0 {
		return ctrl.Result{}, &problem{reason.MissingRotationPending, fmt.Sprintf(
			"source Secret %s/%s lacks current secrets %v; restore them from backup", r.Namespace, naming.SourceSecretName(cs), missing)}, nil
	}
	pending := engine.InspectPending(src.Data, keys, cs.Status.RotationID)

	// Distribution stands down while a rotation has not applied its secrets.
	// When it fails, only a rollback may go ahead: it is what repairs a
	// source Secret the backend refuses.
	var distProb *problem
	if usePending, write := engine.Distribution(cs.Status, pending); write {
		secrets := cur
		if usePending {
			secrets = engine.Pending(src.Data, keys)
		}
		if err := r.distribute(ctx, cs, p, secrets, r.servedGeneration(cs)); err != nil {
			prob, err := distributionProblem(ctx, err)
			if prob == nil {
				if prob = classify(err); prob == nil {
					return ctrl.Result{}, nil, err
				}
			}
			distProb = prob
		}
	}
	r.noteHash(cs)
	rolledOut, err := r.syncCoverage(ctx, cs)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	waiting, scopeProb, err := r.scopeMoved(ctx, cs, p)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	cs.Status.RetirementWaitsFor = waiting
	if scopeProb != nil || len(waiting) > 0 {
		// Retiring shared old credentials waits for every set on the
		// cluster; a rollback's reset is not retirement and does not.
		if cs.Status.Phase == v1.PhaseDistributed {
			rolledOut = false
		}
		if scopeProb != nil && cs.Status.Phase == v1.PhaseDistributed && !cs.Status.DiscardApplied {
			return ctrl.Result{RequeueAfter: engine.RequeueRollout}, scopeProb, nil
		}
	}

	// Every reconcile in Distributed repairs an instance that lost the
	// users phase 1 made (rebuilt from an empty data directory): nothing
	// else re-applies it before the discard, and consumers reach every
	// instance. A failure does not hold the rest of the reconcile.
	repairProb, err := r.repairPending(ctx, cs, p, src, cur, pending)
	if err != nil {
		return ctrl.Result{}, nil, err
	}

	in := engine.Input{
		Status:         cs.Status,
		RotateRequest:  cs.Annotations[engine.RotateAnnotation],
		DiscardRequest: cs.Annotations[engine.DiscardAnnotation],
		AbortRequest:   cs.Annotations[engine.AbortAnnotation],
		RecoverRequest: cs.Annotations[engine.RecoverAnnotation],
		NoInstances:    p.noInstances,
		Pending:        pending,
		Policy:         cs.Spec.Rotation.DiscardPolicy,
		GracePeriod:    r.gracePeriod(cs),
		Consumers:      engine.DeclaredConsumers(cs.Spec),
		RolloutDone:    rolledOut,
		Now:            r.now(),
	}
	if in.Irreversible, err = r.irreversible(ctx, cs, p, cur, pending); err != nil {
		return ctrl.Result{}, nil, err
	}
	if at := cs.Status.RolledOutAt; at != nil {
		in.RolloutDoneAt = at.Time
	} else {
		in.RolloutDoneAt = in.Now
	}
	due, err := r.policyDue(ctx, cs, p, cur, in.Now)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	in.PolicyRotation = due.RotationID
	cs.Status.NextRotationAt = nil
	if due.NextAt != nil {
		t := metav1.NewTime(*due.NextAt)
		cs.Status.NextRotationAt = &t
	}
	d := engine.Decide(in)
	// Why a set does (or does not) move, for whoever debugs a stalled one
	// (--zap-log-level=debug); decisions carry no secrets.
	logFrom(ctx).V(1).Info("decided", "phase", cs.Status.Phase, "rotation", cs.Status.RotationID,
		"action", d.Action.String(), "reason", string(d.Reason), "requeue", d.Requeue.String(), "rolledOut", rolledOut,
		"rotateRequest", in.RotateRequest, "discardRequest", in.DiscardRequest)
	if distProb != nil && d.Action != engine.Rollback && d.Action != engine.Recover {
		return ctrl.Result{RequeueAfter: engine.RequeueRollout}, distProb, nil
	}
	res, prob, err := r.act(ctx, cs, p, src, d, due.Why)
	// A transition may have changed what the Secrets hold.
	r.noteHash(cs)
	if prob == nil && err == nil {
		prob = stuckRollout(cs)
	}
	if prob == nil && err == nil && repairProb != nil {
		prob = repairProb
		if res.RequeueAfter == 0 || res.RequeueAfter > repairRecheck {
			res.RequeueAfter = repairRecheck
		}
	}
	if err == nil && prob == nil && due.NextAt != nil && d.Action == engine.None {
		if left := due.NextAt.Sub(in.Now); left > 0 && (res.RequeueAfter == 0 || left < res.RequeueAfter) {
			res.RequeueAfter = left
		}
	}
	return res, prob, err
}

// irreversible: a backend without overlap invalidated the current secrets
// once it applied. When a rollback is requested before rekey recorded that,
// the backend is asked (a crash may have come between the two): a current
// secret it no longer accepts means the rotation can only complete.
func (r *Reconciler) irreversible(ctx context.Context, cs *v1.CredentialSet, p *plan, cur engine.Secrets, pending engine.PendingState) (bool, error) {
	st, traits := cs.Status, p.backend.Traits()
	if engine.AppliedInPlace(st, traits) {
		return true, nil
	}
	if traits.Overlap || !engine.Active(st) {
		return false, nil
	}
	if pending != engine.PendingNone {
		return true, nil
	}
	if cs.Annotations[engine.AbortAnnotation] == "" && cs.Annotations[engine.RecoverAnnotation] == "" {
		return false, nil
	}
	err := p.backend.Precheck(ctx, cur)
	if rf, refused := engine.AsRefusal(err); refused {
		// Only a current secret the backend no longer accepts proves the
		// rotation applied; any other refusal (an old version, an
		// unhealthy cluster) says nothing about it.
		return rf.Reason == string(reason.KeyMismatch), nil
	}
	return false, err
}

// policyDue asks the rotation policy; the backend's version is read only
// when the policy needs it.
func (r *Reconciler) policyDue(ctx context.Context, cs *v1.CredentialSet, p *plan, cur engine.Secrets, now time.Time) (engine.PolicyDue, error) {
	in := engine.PolicyInput{Rotation: cs.Spec.Rotation, Status: cs.Status, Now: now}
	idle := cs.Status.Phase == v1.PhaseIdle || cs.Status.Phase == ""
	if cs.Spec.Rotation.Policy == v1.PolicyWithVersionUpgrade && idle && !cs.Status.ResetPending {
		v, err := p.backend.Version(ctx, cur)
		if err != nil {
			return engine.PolicyDue{}, fmt.Errorf("read the backend version for policy WithVersionUpgrade: %w", err)
		}
		in.Version = v
	}
	return engine.Due(in), nil
}

// servedGeneration is the generation of what consumers are given.
func (r *Reconciler) servedGeneration(cs *v1.CredentialSet) int64 {
	if cs.Status.Phase != v1.PhaseIdle && cs.Status.RotateApplied {
		return engine.TargetGeneration(cs.Spec.Rotation, cs.Status)
	}
	return cs.Status.KeyGeneration
}

func (r *Reconciler) gracePeriod(cs *v1.CredentialSet) time.Duration {
	if g := cs.Spec.Rotation.GracePeriod; g != nil {
		return g.Duration
	}
	return r.DefaultGracePeriod
}

// repairRecheck: how soon an instance that could not be checked or
// repaired while Distributed is tried again, as the health gate polls.
const repairRecheck = 10 * time.Second

// repairDue: the rotation is Distributed, both passwords are meant to be
// valid on every instance, and the discard has not started (from then on
// Retire repairs instead, with pending only).
func repairDue(st v1.CredentialSetStatus, pending engine.PendingState) bool {
	return st.Phase == v1.PhaseDistributed && st.RotateApplied && !st.DiscardStarted && !st.DiscardApplied &&
		pending == engine.PendingMatch
}

// repairPending runs the backend's engine.Repairer when repairDue. Its
// failure (an instance that does not answer, a refusal, a login refused)
// is a problem to report, not an error: the reconcile goes on (consumers,
// discard) and polls.
func (r *Reconciler) repairPending(ctx context.Context, cs *v1.CredentialSet, p *plan, src *corev1.Secret, cur engine.Secrets, pending engine.PendingState) (*problem, error) {
	rp, ok := p.backend.(engine.Repairer)
	if !ok || !repairDue(cs.Status, pending) {
		return nil, nil
	}
	err := rp.RepairPending(ctx, cur, engine.Pending(src.Data, p.backend.Keys()))
	if err == nil {
		return nil, nil
	}
	if u, ok := engine.AsUnreachable(err); ok {
		return &problem{reason.InstanceUnreachable, fmt.Sprintf(
			"instance %s is unreachable, so rekey cannot check that it accepts both the old and the new passwords of the rotation; nothing is lost and it resumes by itself: rekey checks again every 10 s and repairs the instance once it answers: %v", u.Instance, u.Err)}, nil
	}
	if prob := classify(err); prob != nil {
		return prob, nil
	}
	if isRace(ctx, err) {
		return nil, err
	}
	// E.g. the admin refused on a rebuilt instance whose bootstrap has
	// not recreated it yet: reported, and tried again.
	return &problem{reason.BackendError, err.Error() + "; rekey checks again every 10 s"}, nil
}
