package explorer

import (
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// woundDown: the set is gone, or its wind-down emptied its source Secret:
// rekey needs no admin any more.
func woundDown(w *World) bool { return w.Gone || emptied(w) }

// emptied: the wind-down of a deleted set emptied its source Secret,
// after its backend step.
func emptied(w *World) bool {
	return w.deleted() && w.Source != nil && len(w.Source.Data) == 0
}

// nothingLeftValid: once a set deleted with deletionPolicy Discard is
// gone (or its wind-down emptied its source Secret), every instance
// accepts for each of its users only the password the distribution Secret
// holds (what consumers run with): no secondary password, no pending
// secret, no prior generation. Retain keeps everything as it was; a user
// a DBA changed by hand is the DBA's.
func nothingLeftValid(w *World) string {
	if !woundDown(w) || w.Set.Spec.OnDeletion() == v1.DeletionRetain {
		return ""
	}
	if w.rabbit() {
		return rabbitLeftValid(w)
	}
	if w.ceph() {
		return cephLeftValid(w)
	}
	if w.postgres() {
		return pgLeftValid(w)
	}
	for _, in := range w.held() {
		if w.returned(in) {
			// It came back after the set's last reconcile (for a gone
			// set, after its wind-down): what it holds is what it left
			// with, which no rule of rekey's can reach.
			continue
		}
		for _, k := range w.keys() {
			a := in.acct(k)
			if a.Hand || !a.Exists {
				continue
			}
			if a.Marked && w.Set.Spec.OnDeletion() == v1.DeletionDelete {
				return fmt.Sprintf("the set is %s (deletionPolicy Delete) and %s still has %s, which rekey created for it", goneOrEmptied(w), in.Name, k)
			}
			if a.Secondary != "" {
				return fmt.Sprintf("the set is %s (deletionPolicy %s) and %s still accepts %s=%s as a secondary password", goneOrEmptied(w), w.Set.Spec.OnDeletion(), in.Name, k, a.Secondary)
			}
			// A distribution Secret still serving what a restore dropped,
			// to an instance that never accepted it, is the restore's
			// doing (lostElsewhere), as for no lockout.
			if w.Dist != nil && a.Primary != string(w.Dist.Data[k]) && !lostElsewhere(w, in, string(w.Dist.Data[k])) {
				return fmt.Sprintf("the set is %s (deletionPolicy %s) and %s accepts %s=%s, while its consumers were given %s", goneOrEmptied(w), w.Set.Spec.OnDeletion(), in.Name, k, a.Primary, w.Dist.Data[k])
			}
		}
	}
	return ""
}

func goneOrEmptied(w *World) string {
	if w.Gone {
		return "gone"
	}
	return "wound down (its source Secret emptied)"
}
