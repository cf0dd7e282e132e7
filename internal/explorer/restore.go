package explorer

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"maps"
	"slices"
	"sort"

	"rekey.io/rekey/internal/engine"
)

// A restore of the set's status and source Secret from backup, and what
// the invariants excuse of what it dropped (the user's doing).

// restoreBackup: what the source Secret held since the backup is lost by
// the restore, the user's doing: noted in Lost, which "nothing lost"
// excuses.
func restoreBackup(w *World) bool {
	if w.Backup == nil || w.Source == nil || w.Gone {
		return false
	}
	kept := map[string]bool{}
	for _, v := range w.Backup.Source {
		kept[string(v)] = true
	}
	for _, v := range w.Source.Data {
		if !kept[string(v)] && !slices.Contains(w.Lost, string(v)) {
			w.Lost = append(w.Lost, string(v))
			for _, in := range w.present() {
				for _, a := range in.Users {
					if a.Accepts(string(v)) && !slices.Contains(w.LostHeld, in.Name+"="+string(v)) {
						w.LostHeld = append(w.LostHeld, in.Name+"="+string(v))
					}
				}
			}
		}
	}
	sort.Strings(w.Lost)
	sort.Strings(w.LostHeld)
	if !maps.EqualFunc(w.Source.Data, w.Backup.Source, slices.Equal) || !equality.Semantic.DeepEqual(w.Set.Status, w.Backup.Status) {
		w.Restores++
	}
	w.Set.Status = *w.Backup.Status.DeepCopy()
	w.Source.Data = maps.Clone(w.Backup.Source)
	return true
}

// lostElsewhere: a restore from an older backup dropped pw, the only copy
// rekey trusts, while in did not accept it (it was away, or out of the
// spec, while the rotation that made pw ran). A consumer may still hold
// pw (read before the restore, or from a distribution Secret rekey keeps
// serving while the backend refuses the current secrets), but rekey
// cannot give in a secret it no longer has: it never takes one from a
// distribution Secret, which the consumers' namespace can write. The
// restore's doing, as adminAccepted and staleRestore say. An instance that
// accepted pw when it was dropped is still held to it: rekey must not
// take it away while a consumer holds it (TestPathRecoverAfterRestore).
func lostElsewhere(w *World, in *Instance, pw string) bool {
	return slices.Contains(w.Lost, pw) && !slices.Contains(w.LostHeld, in.Name+"="+pw)
}

// staleRestore: a restore from backup dropped the only secret an instance
// accepts for a user; only a newer backup brings it back (the user's way
// out, not one rekey can name), so no way back to Idle is owed.
func staleRestore(w *World) bool {
	if len(w.Lost) == 0 || w.Source == nil {
		return false
	}
	if w.rabbit() {
		return rabbitStaleRestore(w)
	}
	if w.ceph() {
		// Never: the cluster still holds every key rekey minted, and the
		// refusals name the read back (delete the key from the source
		// Secret), so a way back is owed. Excusing a restore that dropped
		// a key the cluster holds hid a wedge (the read back's generation,
		// TestPathCephReadBackNewerGeneration).
		return false
	}
	if w.postgres() {
		return pgStaleRestore(w)
	}
	for _, in := range w.held() {
		for _, k := range w.keys() {
			a := in.acct(k)
			if a.Hand || !a.Exists {
				continue
			}
			if !a.Accepts(string(w.Source.Data[k])) && !a.Accepts(string(w.Source.Data[engine.PendingKey(k)])) && slices.ContainsFunc(w.Lost, a.Accepts) {
				return true
			}
		}
	}
	return false
}
