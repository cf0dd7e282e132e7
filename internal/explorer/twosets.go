package explorer

import (
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// The two-set world (Options.TwoSets): a second set, db2, on the same
// MySQL instances as db, as two teams' sets on one shared cluster are. It
// has its own user (SHOP, which rekey creates for it, marked as db2's),
// its own consumer (Deployment app/web2, one pod) and distribution Secret
// (app/db2-creds), and deletionPolicy Delete. It connects as another
// admin account (ROOT, whose password comes from its
// admin.passwordSecretRef and never changes), so neither set rotates an
// account the other uses: specs that would (a user in both; one set
// rotating the account the other connects as) are refused before either
// runs a statement, by mysql.Clash and mysql.AdminClash
// (TestMySQLSetsSharingUsers on real servers). What this world checks is
// the rest: whatever each set does, crashes included, every invariant
// holds for db2 as for db in every state, so neither touches the other's
// consumers, admin or users.
const (
	// RootKey is the account db2 connects as.
	RootKey = "ROOT_PASSWORD"
	// ShopKey is db2's user.
	ShopKey  = "SHOP_PASSWORD"
	peerName = "db2"
)

// appKey is the application user a world's summary shows.
func (w *World) appKey() string {
	if w.Second {
		return ShopKey
	}
	return AppKey
}

// adminAccount is the account the world's set connects as.
func (w *World) adminAccount() string {
	if w.Second {
		return RootKey
	}
	return AdminKey
}

// mine: the account k is the world's set's to rotate (the other set's
// user and admin are not).
func (w *World) mine(k string) bool {
	if w.rabbit() {
		_, ok := rabbitGenerationOf(rabbitBaseOf(w.Set), k)
		return ok
	}
	if w.postgres() {
		return pgMine(w, k)
	}
	if w.cephInPlace() {
		return k == cephBase
	}
	if w.ceph() {
		return cephMine(w, k) // db2's client.shop (cephtwosets.go)
	}
	return k != RootKey && (k == ShopKey) == w.Second
}

// returned: in came back to the cluster and the world's set has not
// reconciled since (Instance.Returned, Returned2).
func (w *World) returned(in *Instance) bool {
	if w.Second {
		return in.Returned2
	}
	return in.Returned
}

// stranded: the world's set cannot log in on in (Instance.Stranded: the
// first set's rotated admin; db2's never changes).
func (w *World) stranded(in *Instance) bool { return !w.Second && in.Stranded }

// unreached: no rule holds in to what it accepts for the world's set now
// (it does not answer, came back since the set's last reconcile, or the
// set cannot log in there).
func (w *World) unreached(in *Instance) bool { return in.Down || w.returned(in) || w.stranded(in) }

// cameBack: in returns to the cluster, for every set of the world.
func (w *World) cameBack(in *Instance) {
	in.Present, in.Returned, in.Returned2 = true, true, w.Peer != nil
}

// link gives w's peer what the two sets share: the instances, the
// switchover under way, the clock.
func (w *World) link() *World {
	if p := w.Peer; p != nil {
		p.Instances, p.Switch, p.Abandoned, p.Clock = w.Instances, w.Switch, w.Abandoned, w.Clock
	}
	return w.Peer
}

// addPeer adds db2 to w and provisions it: SHOP is created on every
// instance, its consumer's pod reads its distribution Secret.
func addPeer(w *World) error {
	p := newSetWorld(peerName, "uid-2", peerName+"-creds", "web2")
	p.Second, p.FixedAdmin = true, true
	p.Set.Spec.DeletionPolicy = v1.DeletionDelete
	if w.rabbit() {
		rabbitPeer(p) // its own user base on the broker (rabbittwosets.go)
	} else if w.postgres() {
		pgPeer(w, p) // its own login base and group on the cluster (pgtwosets.go)
	} else if w.ceph() {
		cephPeer(p) // its own entity on the monitor (cephtwosets.go)
	} else {
		p.Set.Annotations[UsersAnnotation] = ShopKey
		for _, in := range w.Instances {
			in.set(RootKey, Account{Exists: true, Primary: initial(RootKey)})
		}
	}
	p.Instances, w.Peer = w.Instances, p
	for i := 0; i < 5 && p.Set.Status.KeyGeneration == 0; i++ {
		if _, err := p.Reconcile(""); err != nil {
			return fmt.Errorf("provisioning %s: %w (%v)", peerName, err, p.Warnings)
		}
	}
	if _, err := p.Reconcile(""); err != nil {
		return err
	}
	if p.Set.Status.KeyGeneration == 0 || p.Dist == nil {
		return fmt.Errorf("provisioning %s did not finish: %s %v", peerName, p.Summary(), p.Warnings)
	}
	restartPod(p)
	p.Warnings = nil
	return nil
}

// peerTransitions are what db2's user and consumer do.
func peerTransitions() []Transition {
	on := func(name string, apply func(*World) bool) Transition {
		return Transition{peerName + ": " + name, func(w *World) bool { return w.Peer != nil && apply(w.link()) }}
	}
	return []Transition{
		on("user: rotate r1", annotate(engine.RotateAnnotation, "r1")),
		on("user: rotate r2", annotate(engine.RotateAnnotation, "r2")),
		on("user: discard (active ID)", activeRequest(engine.DiscardAnnotation)),
		on("user: abort (active ID)", activeRequest(engine.AbortAnnotation)),
		on("user: recover c1", annotate(engine.RecoverAnnotation, "c1")),
		on("consumer pod restarts (reads the Secret)", restartPod),
		on("user: delete the set", deleteSet),
		on("user: delete the consumer Deployment (the set deleted)", deleteConsumer),
	}
}

// reconciles are a reconcile of the set of(w) picks, and (with crashes)
// one that crashes the manager at each persisted step it passes (the
// n-th pass of a step that repeats, once per instance).
func reconciles(w *World, o Options, of func(*World) *World) []Step {
	note := ""
	if of(w).Second {
		note = " (reconciling " + peerName + ")"
	}
	c := w.Clone()
	hit, err := of(c).Reconcile("")
	out := []Step{{"reconcile" + note + errNote(err), c}}
	if !o.Crashes {
		return out
	}
	count := map[string]int{}
	for _, h := range hit {
		count[h]++
		if !crashPoints[h] {
			continue
		}
		at := fmt.Sprintf("%s#%d", h, count[h])
		c := w.Clone()
		_, _ = of(c).Reconcile(at)
		out = append(out, Step{"manager crashes after " + at + note, c})
	}
	return out
}

func itself(w *World) *World { return w }
func peerOf(w *World) *World { return w.link() }
