package explorer

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// Transition is one thing the world can do next. Apply changes w (a
// clone) and reports false when the transition does not apply there or
// changes nothing.
type Transition struct {
	Name  string
	Apply func(w *World) bool
}

// Options choose which transitions a run explores.
type Options struct {
	// Instances the cluster starts with.
	Instances []string
	// Crashes: crash the manager at every persisted step a reconcile
	// passes (each a transition of its own).
	Crashes bool
	// Scaling: an instance leaves the cluster with its volume and returns
	// with what it held then, rebuilt empty, or rebuilt by CLONE from the
	// primary.
	Scaling bool
	// HandChanges: a DBA sets an application user's password on one
	// instance by hand; and sets it back as rekey's message says.
	HandChanges bool
	// Backups: the set's status and source Secret restored from the
	// backup taken when it was first Idle.
	Backups bool
	// Outages: an instance other than the first stops answering, and
	// answers again.
	Outages bool
	// StaleReads: a reconcile reads the set as it was before its last
	// status change (a cache that lags at a leader handover).
	StaleReads bool
	// Deletion: the user deletes the set, sets its deletionPolicy to
	// Retain, and deletes the consumer's Deployment once the set is
	// deleted.
	Deletion bool
	// Policy is the set's deletionPolicy when it is created (Discard when
	// empty).
	Policy v1.DeletionPolicy
	// PolicyEdits: the user also sets deletionPolicy to Discard and to
	// Delete (with Deletion), before or after deleting the set.
	PolicyEdits bool
	// Schedule: the set rotates with policy Schedule inside a daily
	// maintenance window, and time passes an hour at a time.
	Schedule bool
	// DiscardGenerations: the user sets spec.rotation.discardGeneration
	// (the discard GitOps declares) to the generation the active rotation
	// produces, and to the current one.
	DiscardGenerations bool
	// Switchover: the primary is switched over to another instance, in
	// the steps MOCO's switchover (or a DBA's) takes (switchover.go); the
	// cluster manager abandons one before the promotion; the primary
	// fails over to a replica, and answers again as a replica
	// (failover.go).
	Switchover bool
	// Checks: the user asks for the set's checks (kubectl rekey check),
	// with a fresh request ID and again with one already answered.
	Checks bool
	// SpecEdits: the user edits the spec at any state: removes the
	// application user from spec.mysql.users and adds it back, an
	// instance from the spec's instances, the consumer from
	// spec.consumers (specedits.go).
	SpecEdits bool
	// UserAdds: with SpecEdits, also a new user added to the spec (and
	// removed again).
	UserAdds bool
	// FixedAdmin: the admin rekey connects as is not rotated by the set
	// (World.FixedAdmin).
	FixedAdmin bool
	// AppMade: the application user does not exist before rekey, so
	// provisioning creates it, marked for the set (deletionPolicy Delete
	// drops it); otherwise every user is adopted.
	AppMade bool
	// TwoSets: a second set on the same instances, with its own user,
	// consumer and admin account, and what its user does (twosets.go).
	TwoSets bool
	// RabbitMQ: the set is the RabbitMQ model's (rabbitmodel.go), on one
	// broker (Instances is ignored), which may stop answering; Postgres,
	// the PostgreSQL model's (pgmodel.go), on a primary and a replica.
	RabbitMQ, Postgres bool
	// Ceph: the set is the Ceph model's (cephmodel.go), one entity
	// rotated Overlapping on one monitor (Instances is ignored), which
	// may stop answering; CephInPlace, rotated InPlace (cephinplace.go);
	// CephAdmin, that entity the admin rekey runs as (cephadmin.go).
	Ceph, CephInPlace, CephAdmin bool
	// Adopt: with RabbitMQ or Postgres, the set adopts an existing user.
	Adopt bool
	// Logins: with Postgres, a second login; TerminateSessions set too;
	// Failover, the primary down and the replica promoted (pgfailover.go).
	Logins, TerminateSessions, Failover bool
	// KeepPriors: with Ceph, spec.ceph.keepPriorKeyCount.
	KeepPriors int
	// Observe, when set, sees every new state breadth first explores (a
	// test's proof that it reached what it is about).
	Observe func(*World)
	// Only, when set, keeps just the transitions whose names start with
	// one of these (reconciles and crashes are always kept): a known path
	// is explored within seconds among the few transitions it needs.
	Only []string
}

func (o Options) keeps(name string) bool {
	if len(o.Only) == 0 {
		return true
	}
	for _, p := range o.Only {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// DefaultOptions is what `go test` explores. Instances scale in and
// return (with their volume, or rebuilt) by default; REKEY_EXPLORE_SCALING=0
// leaves that out. Likewise switchovers (REKEY_EXPLORE_SWITCHOVER=0) and
// spec edits (REKEY_EXPLORE_SPECEDITS=0). Some transitions are explored
// only on request:
// REKEY_EXPLORE_STALE=1 adds
// reconciles from a stale read of the set (TestPathStaleReads explores
// them by default among the transitions they need; across all of them
// they also reach the deletion path below).
// REKEY_EXPLORE_DELETION_FINDINGS=1 adds restores from backup and policy
// edits to TestPathDeletion (deletionFindings).
func DefaultOptions() Options {
	return Options{Instances: []string{"i0", "i1"}, Crashes: true, HandChanges: true, Backups: true, Outages: true, Deletion: true,
		PolicyEdits: true,
		Scaling:     os.Getenv("REKEY_EXPLORE_SCALING") != "0",
		Switchover:  os.Getenv("REKEY_EXPLORE_SWITCHOVER") != "0",
		SpecEdits:   os.Getenv("REKEY_EXPLORE_SPECEDITS") != "0",
		StaleReads:  os.Getenv("REKEY_EXPLORE_STALE") == "1"}
}

// crashPoints are the steps after which the manager persisted something
// (status, source Secret, a backend instance): a crash right after each.
var crashPoints = map[string]bool{
	"rotate/phase-rotating": true, "rotate/pending-stored": true, "rotate/rotate-applied": true,
	"rotate/pending-distributed": true, "rotate/phase-distributed": true,
	"discard/discard-started": true, "discard/discard-applied": true, "discard/confirmed": true, "discard/phase-idle": true,
	"abort/phase-idle": true, "reset/backend-reset": true, "provision/source-stored": true,
	"model/applied": true, "model/retired": true, "model/reset": true, "model/repaired": true, "model/upkeep": true,
	"provision/rabbitmq-user-put": true, "rotate/rabbitmq-user-put": true, "rotate/rabbitmq-user-deleted": true,
	"discard/rabbitmq-user-deleted": true, "reset/rabbitmq-user-put": true, "reset/rabbitmq-user-deleted": true,
	"deprovision/rabbitmq-user-deleted": true, "release/rabbitmq-user-deleted": true, "release/rabbitmq-user-released": true,
	"ceph/generation-created": true, "ceph/prior-removed": true, "rotate/ceph-orphan-removed": true,
	"reset/ceph-generations-doomed": true, "reset/ceph-generation-removed": true,
	"delete/ceph-entity-removed": true, "delete/ceph-record-removed": true,
}

// annotate makes a user request; false when it is already there.
func annotate(key, value string) func(*World) bool {
	return func(w *World) bool {
		if w.Gone || w.Set.Annotations[key] == value {
			return false
		}
		w.Set.Annotations[key] = value
		return true
	}
}

// activeRequest makes a request carrying the active rotation's ID, as
// kubectl rekey discard and abort do.
func activeRequest(key string) func(*World) bool {
	return func(w *World) bool {
		id := w.Set.Status.RotationID
		if id == "" {
			return false
		}
		return annotate(key, id)(w)
	}
}

// setDiscardGeneration: the user (or git, through GitOps) sets
// spec.rotation.discardGeneration to the generation the active rotation
// produces, or to the current one, which discards nothing.
func setDiscardGeneration(active bool) func(*World) bool {
	return func(w *World) bool {
		st, rot := w.Set.Status, &w.Set.Spec.Rotation
		g := st.KeyGeneration
		if active {
			if !engine.Active(st) {
				return false
			}
			g = engine.TargetGeneration(*rot, st)
		}
		if w.Gone || g < 1 || rot.DiscardGeneration != nil && *rot.DiscardGeneration == g {
			return false
		}
		rot.DiscardGeneration = &g
		return true
	}
}

// userTransitions are the requests a user makes: fresh, repeated and
// stale IDs come from a small pool.
func userTransitions() []Transition {
	var out []Transition
	for _, id := range []string{"r1", "r2"} {
		out = append(out, Transition{"user: rotate " + id, annotate(engine.RotateAnnotation, id)})
	}
	out = append(out,
		Transition{"user: discard (active ID)", activeRequest(engine.DiscardAnnotation)},
		Transition{"user: discard r1 (maybe stale)", annotate(engine.DiscardAnnotation, "r1")},
		Transition{"user: abort (active ID)", activeRequest(engine.AbortAnnotation)},
		Transition{"user: abort r1 (maybe stale)", annotate(engine.AbortAnnotation, "r1")},
	)
	for _, id := range []string{"c1", "c2"} {
		out = append(out, Transition{"user: recover " + id, annotate(engine.RecoverAnnotation, id)})
	}
	return out
}

// deleteSet: the user deletes the set. The API server sets its
// deletionTimestamp and keeps it while it has finalizers (rekey's, with
// deletionPolicy Discard); without any it is removed at once.
func deleteSet(w *World) bool {
	if w.deleted() {
		return false
	}
	at := metav1.NewTime(now)
	w.Set.DeletionTimestamp = &at
	w.Gone = len(w.Set.Finalizers) == 0
	return true
}

// setPolicy: the user edits spec.deletionPolicy (also on a set being
// deleted, as the DeletionWaiting event suggests for Retain).
func setPolicy(p v1.DeletionPolicy) func(*World) bool {
	return func(w *World) bool {
		if w.Gone || w.Set.Spec.OnDeletion() == p {
			return false
		}
		w.Set.Spec.DeletionPolicy = p
		return true
	}
}

func deletionTransitions(o Options) []Transition {
	out := []Transition{
		{"user: delete the set", deleteSet},
		{"user: set deletionPolicy Retain", setPolicy(v1.DeletionRetain)},
	}
	if o.PolicyEdits {
		out = append(out,
			Transition{"user: set deletionPolicy Discard", setPolicy(v1.DeletionDiscard)},
			Transition{"user: set deletionPolicy Delete", setPolicy(v1.DeletionDelete)})
	}
	return append(out, Transition{"user: delete the consumer Deployment (the set deleted)", deleteConsumer})
}

// deleteConsumer: the user deletes the consumer's Deployment, and its pod
// goes with it, as the UsersInUse warning of a set deleted with
// deletionPolicy Delete asks. Only once the set is deleted: a consumer
// removed from a set that stays is a spec edit, not modelled.
func deleteConsumer(w *World) bool {
	if !w.deleted() || w.WebGone {
		return false
	}
	w.WebGone, w.Pod = true, Pod{}
	return true
}

// deletionFindings (REKEY_EXPLORE_DELETION_FINDINGS=1) adds restores from
// backup and policy edits to TestPathDeletion, at a depth too costly for
// make test: what found a wind-down after a restore from backup
// (TestPathRestoreThenDelete keeps it).
var deletionFindings = os.Getenv("REKEY_EXPLORE_DELETION_FINDINGS") == "1"

// restartPod: the consumer's pod restarts (its rollout, or on its own)
// and reads the distribution Secret as it is now.
func restartPod(w *World) bool {
	if w.WebGone {
		return false
	}
	before := w.Pod
	w.Pod.Template = w.template()
	w.Orphan = w.Orphan && !w.consumerListed()
	if w.Dist != nil {
		w.Pod.Creds = map[string]string{}
		for k, v := range w.Dist.Data {
			w.Pod.Creds[k] = string(v)
		}
	}
	return before.Template != w.Pod.Template || !maps.Equal(before.Creds, w.Pod.Creds)
}

// handChange: a DBA sets the application user's password on one
// instance by hand: IDENTIFIED BY, which keeps a secondary password, and
// with discard also DISCARD OLD PASSWORD.
func handChange(name string, discard bool) func(*World) bool {
	return func(w *World) bool {
		in := w.instance(name)
		if in == nil || !in.Present || !in.acct(AppKey).Exists || (in.acct(AppKey).Hand && !in.acct(AppKey).Fixed) || w.Gone {
			return false
		}
		a := in.acct(AppKey)
		a.identifiedBy("APP-dba", false)
		if discard {
			a.discard()
		}
		a.Hand, a.Fixed = true, false
		in.set(AppKey, a)
		return true
	}
}

// handFix: the DBA sets it back to the source Secret's current password
// (IDENTIFIED BY, DISCARD OLD PASSWORD), as rekey's repair message says.
func handFix(name string) func(*World) bool {
	return func(w *World) bool {
		in := w.instance(name)
		if in == nil || !in.Present || !in.acct(AppKey).Hand || in.acct(AppKey).Fixed || w.Source == nil || w.Gone {
			return false
		}
		a := in.acct(AppKey)
		in.set(AppKey, Account{Exists: true, Primary: string(w.Source.Data[AppKey]), Hand: true, Fixed: true, Marked: a.Marked, Gen: a.Gen, DualMark: a.DualMark})
		return true
	}
}

func outage(name string, down bool) func(*World) bool {
	return func(w *World) bool {
		in := w.instance(name)
		if in == nil || !in.Present || in.Down == down || w.Gone {
			return false
		}
		in.Down = down
		return true
	}
}

// Transitions lists what the world can do besides reconciling, for o.
func Transitions(o Options) []Transition {
	out := userTransitions()
	if o.Deletion {
		out = append(out, deletionTransitions(o)...)
	}
	if o.Schedule {
		out = append(out, Transition{"clock: an hour passes", hourPasses})
	}
	if o.DiscardGenerations {
		out = append(out,
			Transition{"user: discardGeneration = the active rotation's", setDiscardGeneration(true)},
			Transition{"user: discardGeneration = the current generation", setDiscardGeneration(false)})
	}
	if o.Checks {
		for _, id := range []string{"k1", "k2"} {
			out = append(out, Transition{"user: check " + id, annotate(engine.CheckAnnotation, id)})
		}
	}
	if o.Switchover {
		out = append(out, switchoverTransitions(o)...)
	}
	if o.SpecEdits {
		out = append(out, specEditTransitions(o)...)
	}
	out = append(out, Transition{"consumer pod restarts (reads the Secret)", restartPod})
	if o.TwoSets {
		out = append(out, peerTransitions()...)
	}
	out = append(out, worldTransitions(o)...)
	if o.Backups {
		out = append(out, Transition{"status and source Secret restored from backup", restoreBackup})
	}
	for _, name := range o.Instances {
		if o.HandChanges {
			out = append(out,
				Transition{fmt.Sprintf("DBA sets APP on %s by hand (IDENTIFIED BY, DISCARD OLD PASSWORD)", name), handChange(name, true)},
				Transition{fmt.Sprintf("DBA sets APP on %s by hand (IDENTIFIED BY only: the secondary stays)", name), handChange(name, false)},
				Transition{fmt.Sprintf("DBA sets APP on %s back to the current password", name), handFix(name)})
		}
		if o.Outages && name != o.Instances[0] {
			out = append(out,
				Transition{name + " stops answering", outage(name, true)},
				Transition{name + " answers again", outage(name, false)})
		}
		if o.Scaling && name != o.Instances[0] {
			out = append(out,
				Transition{name + " scaled in (keeps its volume)", scaleIn(name)},
				Transition{name + " returns with its volume", returns(name)},
				Transition{name + " returns rebuilt empty", rebuilt(name)},
				Transition{name + " returns rebuilt by CLONE from the primary", cloned(name)})
		}
	}
	return slices.DeleteFunc(out, func(t Transition) bool { return !o.keeps(t.Name) })
}
