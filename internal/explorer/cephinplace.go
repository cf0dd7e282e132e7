package explorer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
)

// The Ceph InPlace world (option CephInPlace): one monitor and one entity,
// client.app, that existed before rekey (a daemon's key: rekey adopts it)
// and is rotated in place. `ceph auth rotate` replaces the key at once,
// so a consumer holding the old one is refused until its restart: the
// one bounded exception to "no lockout" (inPlaceWindow), which the set's
// own rollout closes. Apply decides from the key the monitor holds as the
// backend does (inPlaceAction): keep a stored pending key, rotate the
// current one, adopt a key minted before a crash lost it, or refuse a key
// nobody stored. Reset succeeds only while the monitor still has the
// current key; Retire only proves the pending one. Deletion
// drops the set's record, and with deletionPolicy Delete removes the
// entity only if rekey minted it (an adopted one stays, its key with its
// consumers). Proven on a real ceph-mon by internal/backend/ceph
// (TestInPlaceRotation, TestProvisionAdoptsAndChecks, TestDecideInPlace,
// TestReleaseOnTheRealMon, TestDeprovisionOnTheRealMon) and test/e2e's
// TestCephInPlace, TestCephInPlaceCrashThenAbort (a kill right after
// `ceph auth rotate`), TestCephDeletion and TestCephInPlaceAdopt.
const CephInPlaceWorld = "ceph-inplace"

func (w *World) cephInPlace() bool {
	return w.Set.Annotations[Annotation] == CephInPlaceWorld || w.cephAdmin()
}

type cephInPlaceBackend struct{ cephBackend }

var _ engine.Releaser = (*cephInPlaceBackend)(nil)
var _ engine.Deprovisioner = (*cephInPlaceBackend)(nil)

func init() {
	registerWorld(CephInPlaceWorld, func(cs *v1.CredentialSet) engine.Backend {
		return &cephInPlaceBackend{cephBackend{w: active, cs: cs}}
	})
	crashPoints["ceph/entity-rotated"] = true
	crashPoints["add/restart-recorded"] = true
	crashPoints["rotate/read-back-recorded"] = true
}

func (b *cephInPlaceBackend) Traits() engine.Traits { return engine.Traits{ReadBack: true} }

// entity is client.app on the monitor, claimed for the set (its record).
func (b *cephInPlaceBackend) entity(in *Instance) Account {
	a := in.acct(cephBase)
	if a.Exists && !a.Marked {
		a.Marked = true
		in.set(cephBase, a)
	}
	return a
}

// holds refuses unless the monitor has exactly key (the backend's
// session.holds).
func (b *cephInPlaceBackend) holds(in *Instance, key, then string) error {
	a := in.acct(cephBase)
	if !a.Exists {
		return mismatchRefusal(cephBase + " does not exist in the cluster, but the source Secret holds a key for it: restore it (ceph auth import) or delete " + cephBase + " from the source Secret and rekey " + then)
	}
	if a.Primary != key {
		return mismatchRefusal("the cluster's key for " + cephBase + " is not the one the source Secret holds (changed outside rekey): delete " + cephBase + " from the source Secret and rekey " + then)
	}
	return nil
}

func (b *cephInPlaceBackend) Provision(_ context.Context, cur engine.Secrets) (engine.Provisioned, error) {
	in, err := b.adminIn()
	if err != nil {
		return engine.Provisioned{}, err
	}
	if key := cur[cephBase]; key != "" {
		if err := b.holds(in, key, "adopts the cluster's key"); err != nil {
			return engine.Provisioned{}, err
		}
		a := b.entity(in)
		return engine.Provisioned{Secrets: cur, Adopted: !a.Minted, Generation: engine.StartGeneration(0, !a.Minted, 0)}, nil
	}
	if a := in.acct(cephBase); a.Exists {
		b.entity(in)
		return engine.Provisioned{Secrets: engine.Secrets{cephBase: a.Primary}, Adopted: !a.Minted}, nil
	}
	in.set(cephBase, Account{Exists: true, Primary: cephBase + cephKeySep + "k-new", Marked: true, Minted: true})
	failpoint.Hit("ceph/generation-created")
	return engine.Provisioned{Secrets: engine.Secrets{cephBase: in.acct(cephBase).Primary}, Generation: 1}, nil
}

func (b *cephInPlaceBackend) Precheck(_ context.Context, cur engine.Secrets) error {
	in, err := b.adminIn()
	if err != nil {
		return err
	}
	if err := b.holds(in, cur[cephBase], "adopts the cluster's key and restarts the consumers onto it; nothing was changed"); err != nil {
		return err
	}
	b.entity(in)
	return nil
}

// RepairIdle is the backend's upkeep at rest: it reports (KeyMismatch) a
// current key the monitor no longer holds, and changes nothing.
func (b *cephInPlaceBackend) RepairIdle(_ context.Context, cur engine.Secrets) error {
	in, err := b.adminIn()
	if err != nil || cur[cephBase] == "" {
		return err
	}
	return b.holds(in, cur[cephBase], idleThen)
}

// What Apply does with the key the monitor holds: the Ceph backend's
// ceph.DecideInPlace, which no package but the registry's may import
// outside the backends; TestInPlaceActionIsTheBackends holds the two to
// the same answer in every case.
const (
	keepPending = iota // the monitor has the stored pending key
	rotateKey          // it still has the current key
	adoptKey           // a key this rotation minted before a crash lost it
	refuseKey          // a key nobody stored
)

func inPlaceAction(cluster, cur, pending string) int {
	switch {
	case pending != "" && cluster == pending:
		return keepPending
	case cluster == cur:
		return rotateKey
	case pending == "":
		return adoptKey
	}
	return refuseKey
}

// Apply is applyInPlace: the rotate is `ceph auth rotate`, a new key (its
// number counts the rotations the monitor made, Gen) replacing the old.
func (b *cephInPlaceBackend) Apply(_ context.Context, cur, pending engine.Secrets, _ int64) (engine.Secrets, error) {
	in, err := b.adminIn()
	if err != nil {
		return nil, err
	}
	a := in.acct(cephBase)
	if !a.Exists {
		return nil, mismatchRefusal(cephBase + " no longer exists in the cluster (deleted outside rekey); nothing was rotated: recreate it, or remove it from the set")
	}
	switch inPlaceAction(a.Primary, cur[cephBase], pending[cephBase]) {
	case keepPending:
		b.entity(in)
		return engine.Secrets{cephBase: pending[cephBase]}, nil
	case adoptKey:
		b.entity(in)
		return engine.Secrets{cephBase: a.Primary}, nil
	case refuseKey:
		return nil, mismatchRefusal("the cluster's key for " + cephBase + " is neither the current nor the pending key the source Secret holds (changed outside rekey); nothing was rotated. Find who changed it; " + takeClusterKey(cephBase, []string{cephBase}))
	}
	b.entity(in)
	if b.w.cephAdmin() {
		key, err := b.rotateAdmin(in)
		if err != nil {
			return nil, err
		}
		return engine.Secrets{cephBase: key}, nil
	}
	key := b.rotate(in)
	failpoint.Hit("ceph/entity-rotated")
	return engine.Secrets{cephBase: key}, nil
}

// rotate is `ceph auth rotate client.app`: a new key (its number counts
// the monitor's rotations, Gen) replaces the old, which pods may hold.
func (b *cephInPlaceBackend) rotate(in *Instance) string {
	a := in.acct(cephBase)
	b.w.RotatedAway = append(b.w.RotatedAway, a.Primary+awaySep+b.w.template())
	slices.Sort(b.w.RotatedAway)
	a.Gen++
	a.Primary = fmt.Sprintf("%s%sk%d", cephBase, cephKeySep, a.Gen)
	in.set(cephBase, a)
	return a.Primary
}

// Retire proves the pending key: the old one died at Apply. A key
// changed outside rekey since is the rotation's to take (recover cannot
// bring the old one back).
func (b *cephInPlaceBackend) Retire(_ context.Context, _, pending engine.Secrets) error {
	in, err := b.adminIn()
	if err != nil {
		return err
	}
	return b.verify(in, pending)
}

func (b *cephInPlaceBackend) Verify(_ context.Context, s engine.Secrets) error {
	in, err := b.adminIn()
	if err != nil {
		return err
	}
	return b.verify(in, s)
}

// Reset cannot bring an old key back: it succeeds only while the monitor
// has the current key (nothing was rotated).
func (b *cephInPlaceBackend) Reset(_ context.Context, cur engine.Secrets) error {
	in, err := b.adminIn()
	if err != nil {
		return err
	}
	if a := in.acct(cephBase); !a.Exists || a.Primary != cur[cephBase] {
		return mismatchRefusal("the cluster no longer has the current key of " + cephBase + ": an in-place rotation cannot be rolled back once Ceph rotated the key. Complete the rotation instead (its new key is the only one that works); with none in flight (the status or the source Secret restored from a backup, or the key rotated outside rekey), delete " + cephBase + " from the source Secret and rekey adopts the cluster's key and restarts the consumers onto it")
	}
	return nil
}

func (b *cephInPlaceBackend) Release(_ context.Context, cur engine.Secrets) error {
	return b.wind(cur, false)
}

func (b *cephInPlaceBackend) Deprovision(_ context.Context, cur engine.Secrets) error {
	return b.wind(cur, true)
}

// wind is planDeletion for one InPlace entity: removed if rekey minted it
// and either the policy is Delete or no consumer was given its key,
// otherwise kept with its record dropped.
func (b *cephInPlaceBackend) wind(cur engine.Secrets, deprovision bool) error {
	in, err := b.adminIn()
	if err != nil {
		return err
	}
	a := in.acct(cephBase)
	if !a.Exists || !a.Marked {
		return nil
	}
	if a.Minted && (deprovision || cur[cephBase] == "") {
		return b.remove(in, []string{cephBase}, "delete/ceph-entity-removed")
	}
	a.Marked = false
	in.set(cephBase, a)
	failpoint.Hit("delete/ceph-record-removed")
	return nil
}

// handRotate: someone runs `ceph auth rotate` (or `ceph auth import` of
// a key of theirs) by hand, once: on client.app (InPlace; in the admin
// world the admin's own key), or on the newest generation's entity
// (Overlapping). A pod holding the key it replaced is refused by a
// person's doing, whenever it read that key (inPlaceWindow): what rekey owes is to tell, and to give
// the consumers a key the monitor accepts by the way its refusal names
// ("no wedge" holds it to that).
func handRotate(w *World) bool {
	in := w.instance(cephMon)
	world := w.Set.Annotations[Annotation]
	if world != CephInPlaceWorld && world != CephWorld && world != CephAdminWorld || in == nil || !in.Present || w.Gone || w.HandRotated ||
		adminHandWindow(w) && !cephAdminHandAfterStep8 {
		return false
	}
	if world == CephWorld {
		return handRotateNewest(cephBase)(w)
	}
	return rotateByHand(w, in, cephBase)
}

// handRotateNewest is handRotate in the Overlapping world, for the newest
// generation of the entity base (client.two too in the world with two
// entities).
func handRotateNewest(base string) func(*World) bool {
	return func(w *World) bool {
		in := w.instance(cephMon)
		if w.Set.Annotations[Annotation] != CephWorld || in == nil || !in.Present || w.Gone || w.HandRotated {
			return false
		}
		entity := ""
		for name, a := range in.Users {
			if g, ok := cephGenerationOf(base, name); ok && a.Exists {
				if n, _ := cephGenerationOf(base, entity); g > n {
					entity = name
				}
			}
		}
		return rotateByHand(w, in, entity)
	}
}

// rotateByHand gives entity a key a person made (ceph auth rotate), once
// per path; false if it does not exist.
func rotateByHand(w *World, in *Instance, entity string) bool {
	a := in.acct(entity)
	if !a.Exists {
		return false
	}
	w.RotatedAway = append(w.RotatedAway, a.Primary+awaySep+byHand)
	slices.Sort(w.RotatedAway)
	a.Primary = entity + cephKeySep + handKey
	in.set(entity, a)
	w.HandRotated = true
	return true
}

// byPerson: key is one a person made by hand (handRotate), not rekey.
func byPerson(key string) bool { return strings.HasSuffix(key, cephKeySep+handKey) }

// awaySep joins a key rotated away and the consumers' restart value then,
// or byHand.
const (
	awaySep = "@"
	byHand  = "by-hand"
	handKey = "hand" // the key a person's rotation makes
)

// inPlaceWindow: the key the consumer's pod holds was rotated away by
// rekey's `auth rotate`, and no rollout has restarted the pod since (its
// restart value is the one of when the key was rotated): the one bounded
// exception to "no lockout", which only InPlace has. A pod a rollout
// restarted since holds what rekey served it, which must work. Or a person
// rotated the key away by hand (handRotate), whenever the pod read it.
// "No wedge" holds the set to closing the window (inPlaceOpen).
func inPlaceWindow(w *World, key string) bool {
	return slices.Contains(w.RotatedAway, key+awaySep+byHand) || w.cephInPlace() && slices.Contains(w.RotatedAway, key+awaySep+w.Pod.Template)
}

// inPlaceOpen: the consumer's pod is refused within the InPlace window or
// after a person's rotation, so the set is not settled yet.
func inPlaceOpen(w *World) bool {
	if !w.cephInPlace() && !w.HandRotated || w.WebGone {
		return false
	}
	key := w.Pod.Creds[cephBase]
	m := w.instance(cephMon)
	return key != "" && m.Present && !m.acct(cephEntityOf(key)).Accepts(key)
}

// dropFromSource is what a refusal of a key changed outside rekey asks of
// a person: delete client.app (at rest) or its pending entry (during a
// rotation) from the source Secret, so that rekey takes the cluster's key.
func dropFromSource(c *World) string {
	if step := putAdminStep(c); step != "" { // the admin's keyring first: nothing runs without it
		return step
	}
	if c.Source == nil {
		return ""
	}
	rotating := c.Set.Status.Phase == v1.PhaseRotating || c.Set.Status.Phase == v1.PhaseDistributed
	for _, base := range cephKeys(c.Set) {
		key := base
		if rotating {
			key = engine.PendingKey(base) // "during a rotation"
		}
		if c.Source.Data[key] == nil || !says(c, "delete "+key+" from the source Secret") {
			continue
		}
		drop := []string{key}
		if key == base && says(c, "(with "+engine.PendingKey(base)) {
			drop = append(drop, engine.PendingKey(base), engine.RotationIDKey)
			key += " (with its pending key and rotation ID)"
		}
		personEdited(c, drop...) // one write
		return "user: deletes " + key + " from the source Secret, as the refusal says"
	}
	return ""
}

// NewCephInPlaceWorld is a set of one entity, InPlace, with one consumer,
// on a monitor where the entity has a key from before rekey.
func NewCephInPlaceWorld() *World {
	w := NewCephWorld()
	w.Set.Annotations[Annotation] = CephInPlaceWorld
	w.Instances[0].Users[cephBase] = Account{Exists: true, Primary: cephBase + cephKeySep + "k0"}
	return w
}
