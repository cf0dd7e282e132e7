package explorer

import (
	"strconv"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
)

// Several entities in the Ceph world's set (EntitiesAnnotation): beside
// client.app, client.two, each rotated Overlapping, one generation number
// for the set (client.app.<N> and client.two.<N>). The backend decides for
// each in the spec's order, as the Ceph backend does (overlap.go,
// provision.go, upkeep.go, deletion.go): Precheck, the upkeep at rest and
// the reset stop at the first entity refused, before anything is changed;
// Apply makes one entity's generation after the other's (a crash between
// leaves the first made); Retire proves every new key before any prior
// goes, and every prior is checked for its record before any goes; the
// wind-down checks each entity's current key before any of the other
// generations goes. Proven on a real ceph-mon by TestTwoEntitiesOverlapping
// (and, with one entity, by the tests cephmodel.go names).

const (
	// EntitiesAnnotation, "2", makes the set rotate client.two too.
	EntitiesAnnotation = "explorer.rekey.io/ceph-entities"
	cephBase2          = "client.two"
	// cephUnknownKey is what the Ceph backend's refusal of a Discard
	// wind-down says when the source Secret lacks a spec entity's key.
	cephUnknownKey = "rekey cannot tell whether a consumer runs it"
)

// cephKeys are the entities cs's spec lists, in its order.
func cephKeys(cs *v1.CredentialSet) []string {
	if e := cs.Annotations[CephEntityAnnotation]; e != "" {
		return []string{e} // db2's (cephtwosets.go)
	}
	if cs.Annotations[EntitiesAnnotation] == "2" {
		return []string{cephBase, cephBase2}
	}
	return []string{cephBase}
}

// cephGenerationOf is N of base.<N>.
func cephGenerationOf(base, entity string) (int64, bool) {
	rest, ok := strings.CutPrefix(entity, base+".")
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, ok && err == nil && n > 0
}

// cephGeneration is N of a generation entity of any base (cephBases).
func cephGeneration(entity string) (int64, bool) {
	for _, base := range cephBases {
		if g, ok := cephGenerationOf(base, entity); ok {
			return g, true
		}
	}
	return 0, false
}

// cephBaseOf is the spec entity a generation entity is of ("" if none).
func cephBaseOf(entity string) string {
	for _, base := range cephBases {
		if _, ok := cephGenerationOf(base, entity); ok {
			return base
		}
	}
	return ""
}

// wind is planDeletion carried out: for each entity, the generation cur
// holds stays (Discard, its record dropped) or goes (Delete); every other
// generation of the set goes, under Discard only once the monitor is seen
// to hold that entity's current key (guardCurrent), every entity's checked
// before anything goes. Of an entity cur holds no key for, every generation
// goes under Delete (its consumers are gone); under Discard one made for
// the set stops the wind-down before anything goes, since rekey cannot tell
// whether a consumer runs it (TestReleaseWithoutAnEntitysKeyOnTheRealMon).
func (b *cephBackend) wind(cur engine.Secrets, deprovision bool) error {
	in, err := b.mon()
	if err != nil {
		return err
	}
	var remove, unmark []string
	for _, base := range b.Keys() {
		entity, _, held := b.current(in, cur, base)
		has := cur[base] != ""
		others := 0
		for _, g := range b.generations(in, base) {
			name := cephEntityIn(base, g)
			switch {
			case !in.acct(name).Marked:
			case has && name == entity && !deprovision:
				unmark = append(unmark, name)
			case has && name == entity:
				remove = append(remove, name)
			default:
				remove = append(remove, name)
				others++
			}
		}
		if !deprovision && !has && others > 0 {
			return mismatchRefusal("the source Secret holds no key for " + base + ", of which the cluster holds generations made for the set: " + cephUnknownKey + ". Put its current key back in the source Secret, or set spec.deletionPolicy to Retain to let the set go without changing the cluster")
		}
		if !deprovision && has && others > 0 && !held {
			return mismatchRefusal("the cluster does not hold the current key of " + base + " (" + entity + ") that the source Secret holds (changed outside rekey), so deleting the set removed none of its other generations: a consumer may still use one. Restore the key (ceph auth import), or set spec.deletionPolicy to Retain to let the set go without changing the cluster")
		}
	}
	if err := b.remove(in, remove, "delete/ceph-entity-removed"); err != nil {
		return err
	}
	for _, n := range unmark {
		a := in.acct(n)
		a.Marked = false
		in.set(n, a)
		failpoint.Hit("delete/ceph-record-removed")
	}
	return nil
}

// dropNamedPending completes what dropFromSource did outside a rotation as
// the refusal says (takeResetKey, takeClusterKey): the other entities'
// pending keys it names go too.
func dropNamedPending(c *World) {
	ph := c.Set.Status.Phase
	if c.Source == nil || ph == v1.PhaseRotating || ph == v1.PhaseDistributed || !says(c, "from the source Secret (with") {
		return
	}
	var drop []string
	for _, k := range c.keys() {
		if pk := engine.PendingKey(k); says(c, ", "+pk) || says(c, "with "+pk) {
			drop = append(drop, pk)
		}
	}
	if says(c, "and "+engine.RotationIDKey+", if it holds them") {
		drop = append(drop, engine.RotationIDKey)
	}
	personEdited(c, drop...)
}

// personEdited: a person deletes keys from the source Secret, a write
// whose resourceVersion a real server makes new even when the contents
// are back to ones held before (World.Restores): a restart value rekey
// derives from it then, as its read back's, is new too.
func personEdited(c *World, keys ...string) {
	changed := false
	for _, k := range keys {
		if _, ok := c.Source.Data[k]; ok {
			delete(c.Source.Data, k)
			changed = true
		}
	}
	if changed {
		c.Restores++
	}
}

// handRotateCurrent: in the Overlapping world, a person rotates by hand
// the generation the source Secret's current key names while a newer one
// exists (a rotation's, or one a rollback's reset has still to remove);
// handRotate takes the newest. Once per path, as handRotate. Proven on a
// real mon by the e2e TestCephResetAfterHandRotation.
func handRotateCurrent(w *World) bool { return handRotateCurrentOf(cephBase)(w) }

// handRotateCurrentOf is handRotateCurrent for the entity base (client.two
// in the world with two entities).
func handRotateCurrentOf(base string) func(*World) bool {
	return func(w *World) bool {
		in := w.instance(cephMon)
		if w.Set.Annotations[Annotation] != CephWorld || in == nil || !in.Present || w.Gone || w.HandRotated || w.Source == nil {
			return false
		}
		entity := cephEntityOf(string(w.Source.Data[base]))
		cur, ok := cephGenerationOf(base, entity)
		if !ok {
			return false
		}
		for name, o := range in.Users {
			if g, ok := cephGenerationOf(base, name); ok && o.Exists && g > cur {
				return rotateByHand(w, in, entity)
			}
		}
		return false
	}
}
