package explorer

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
)

// exploreReach explores o breadth first to depth and fails on any
// violation, and unless every one of reach was reached.
func exploreReach(t *testing.T, o Options, depth int, reach map[string]func(*World) bool) {
	t.Helper()
	reached := map[string]bool{}
	o.Observe = func(w *World) {
		for name, ok := range reach {
			reached[name] = reached[name] || ok(w)
		}
	}
	explorePath(t, o, depth)
	for _, name := range slices.Sorted(maps.Keys(reach)) {
		if !reached[name] {
			t.Errorf("never reached: %s", name)
		}
	}
}

// TestCephAdminHand: someone rotates the admin's own key by hand on the
// monitor (cephadmin.go), before, during or after an admin rotation (a
// crash after each of its steps), beside the user's requests, and puts
// the admin's current keyring in its Secret. Every refusal must name a way
// the state accepts ("no dead end"), "admin accepted" excuses only the
// keyring the person rotated away, and the documented actions (the person
// puts the keyring there, as the refusal says; the read back the upkeep
// at rest then names) must give rekey and the consumers a key the monitor
// accepts ("no wedge"). No deletion: a deleted set's wind-down runs the
// same recovery first. The test fails unless rekey took the person's key
// (stored in the admin keyring Secret, and as the source Secret's current
// or pending key: "no wedge" holds the rest of the way), an interrupted admin rotation
// with the rotator stored rotated the person's key away again, and, the
// person's rotation between steps 8 and 9 (the rotator removed, its
// keyring stored), the admin's refusal said the rotator keyring is
// refused too and the person put the admin's keyring back with it still
// stored (RecoverAdmin then deletes it: step 9).
func TestCephAdminHand(t *testing.T) {
	exploreReach(t, Options{CephAdmin: true, HandChanges: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "user: recover c1", "consumer", "someone "}},
		envInt("REKEY_EXPLORE_CEPH_ADMIN_HAND_DEPTH", 7), map[string]func(*World) bool{
			"hand key taken": func(w *World) bool {
				src := w.Source.Data
				return w.AdminKeyring == cephBase+"/hand" && (string(src[cephBase]) == w.AdminKeyring || string(src[engine.PendingKey(cephBase)]) == w.AdminKeyring)
			},
			"both refused between steps 8 and 9, naming the admin keyring Secret": func(w *World) bool {
				return w.HandRotated && adminHandWindow(w) && says(w, putAdminKeyring+"; "+rotatorRefusedToo)
			},
			"hand keyring put back between steps 8 and 9": func(w *World) bool {
				return w.HandRotated && adminHandWindow(w) && w.AdminKeyring == cephBase+"/hand"
			},
			"hand key rotated away by the recovery": func(w *World) bool {
				return w.HandRotated && w.RotatorKeyring == "" && w.AdminKeyring == monKey(w) && slices.ContainsFunc(w.RotatedAway, func(a string) bool {
					return strings.HasPrefix(a, cephBase+"/hand"+awaySep) && !strings.HasSuffix(a, byHand)
				})
			},
		})
}
