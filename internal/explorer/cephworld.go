package explorer

import (
	"fmt"
)

// The Ceph world's side of the invariants, traces and transitions (the
// backend model is cephmodel.go).

// cephLogins are the entities creds (by source Secret key) authenticate
// as, with the key each: the entity a key names.
func cephLogins(creds map[string]string) map[string]string {
	var out map[string]string
	for _, base := range cephBases {
		if key := creds[base]; key != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[cephEntityOf(key)] = key
		}
	}
	return out
}

// cephLeftValid is "nothing left valid after deletion" on the monitor:
// with deletionPolicy Delete no generation the set made is left; with
// Discard only the one its consumers were given, without the set's record.
func cephLeftValid(w *World) string {
	in := w.instance(cephMon)
	if in == nil || !in.Present || w.returned(in) {
		return ""
	}
	for name, a := range in.Users {
		if !w.mine(name) || !a.Exists {
			continue
		}
		served := ""
		if w.Dist != nil {
			base := cephBaseOf(name)
			if base == "" { // the InPlace entity
				base = name
			}
			served = string(w.Dist.Data[base])
		}
		switch {
		case !a.Minted && !a.Marked:
			// Adopted and released: it stays as it was before rekey,
			// with the key its consumers hold, under either policy.
		case a.Marked:
			return fmt.Sprintf("the set is %s (deletionPolicy %s) and %s is still recorded for it", goneOrEmptied(w), w.Set.Spec.OnDeletion(), name)
		// A key a person made by hand is theirs: rekey never served it,
		// and does not remove what Discard leaves.
		case a.Primary != served && !lostElsewhere(w, in, a.Primary) && !byPerson(a.Primary):
			return fmt.Sprintf("the set is %s (deletionPolicy %s) and %s, whose key its consumers were not given, still authenticates", goneOrEmptied(w), w.Set.Spec.OnDeletion(), name)
		}
	}
	return ""
}

// NewCephWorld is a set of one entity, Overlapping, with one consumer, on
// a monitor where rekey mints its first generation when it provisions.
func NewCephWorld() *World {
	w := newSetWorld(setName, "uid-1", distName, webName)
	w.Set.Annotations[Annotation] = CephWorld
	w.FixedAdmin = true // the admin keyring is not the set's to rotate
	w.Instances = []*Instance{{Name: cephMon, Present: true, Users: map[string]Account{}}}
	return w
}

// cephTransitions: the monitor stops answering, and answers again; with
// HandChanges, someone rotates an entity's key by hand.
func cephTransitions(o Options) []Transition {
	out := []Transition{
		{"mon stops answering", func(w *World) bool { return outage(cephMon, true)(w) }},
		{"mon answers again", func(w *World) bool { return outage(cephMon, false)(w) }},
	}
	if o.Ceph && o.KeepPriors > 0 {
		out = append(out, Transition{"user: lower keepPriorKeyCount", edit(lowerKeep)})
	}
	if (o.Ceph || o.CephInPlace || o.CephAdmin) && o.HandChanges {
		out = append(out, Transition{"someone rotates " + cephBase + "'s key by hand (ceph auth rotate)", handRotate})
	}
	if o.Ceph && o.HandChanges {
		out = append(out, Transition{"someone rotates " + cephBase + "'s current generation by hand while a newer exists (ceph auth rotate)", handRotateCurrent})
		// The second entity's, in the world with two (cephentities.go).
		out = append(out,
			Transition{"someone rotates " + cephBase2 + "'s key by hand (ceph auth rotate)", handRotateNewest(cephBase2)},
			Transition{"someone rotates " + cephBase2 + "'s current generation by hand while a newer exists (ceph auth rotate)", handRotateCurrentOf(cephBase2)})
	}
	if o.CephAdmin && o.HandChanges {
		out = append(out,
			Transition{"someone puts " + cephBase + "'s current keyring in the admin keyring Secret (ceph auth get)", putAdmin},
			Transition{"someone rotates " + cephRotator + "'s key by hand while an admin rotation left it (ceph auth rotate)", handChangeRotator})
	}
	return out
}

// KeepPriorsAnnotation is spec.ceph.keepPriorKeyCount of the Ceph world
// (Options.KeepPriors; absent, 0). An annotation of the set, as the spec
// edits' users are (specedits.go): a spec.ceph block would select the real
// Ceph backend rather than the model.
const KeepPriorsAnnotation = "explorer.rekey.io/keep-prior-key-count"
