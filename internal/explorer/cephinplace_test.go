package explorer

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
)

// The Ceph InPlace model (cephinplace.go): a rotation, its discard, an
// abort before and after the key was rotated, recover, a restore from
// backup, the monitor not answering, deletion with each policy, at every
// step with crashes. Every invariant holds (no lockout outside the InPlace
// window its rollout closes); the test fails unless a rotation completed
// with the pod on the new key, an abort was refused once the key was
// rotated, one rolled back before it was, and the set was wound down.
func TestCephInPlace(t *testing.T) {
	explorePolicies(t, Options{CephInPlace: true, Crashes: true, Backups: true, Deletion: true, Only: backendOnly("mon")},
		envInt("REKEY_EXPLORE_CEPH_INPLACE_DEPTH", 7), map[string]func(*World) bool{
			"completed": func(w *World) bool {
				st, key := w.Set.Status, monKey(w)
				return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && key != cephBase+"/k0" && w.Pod.Creds[cephBase] == key
			},
			"abort refused": func(w *World) bool {
				return strings.Contains(strings.Join(w.Warnings, " "), "it can only complete")
			},
			"rolled back": func(w *World) bool { return w.Set.Status.LastRolledBackID == "r1" && monKey(w) == cephBase+"/k0" },
			"wound down":  woundDown,
		})
}

// monKey is the key the monitor holds for client.app.
func monKey(w *World) string { return w.instance(cephMon).acct(cephBase).Primary }

// TestCephInPlaceWalks takes seeded random walks of the Ceph InPlace world
// among every transition it has.
func TestCephInPlaceWalks(t *testing.T) {
	walkWorld(t, Options{CephInPlace: true, HandChanges: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true}, "the Ceph InPlace world", 3)
}

// TestInPlaceActionIsTheBackends: the model's Apply decides as the Ceph
// backend does, for every combination of the key the monitor holds and the
// current and pending keys stored.
func TestInPlaceActionIsTheBackends(t *testing.T) {
	keys := []string{"", "k0", "k1", "k2"}
	for _, cluster := range keys[1:] {
		for _, cur := range keys[1:] {
			for _, pending := range keys {
				if got, want := inPlaceAction(cluster, cur, pending), int(ceph.DecideInPlace(cluster, cur, pending)); got != want {
					t.Errorf("monitor %s, current %s, pending %q: the model decides %d, the backend %d", cluster, cur, pending, got, want)
				}
			}
		}
	}
}

// TestCephAdmin: the InPlace world whose entity is rekey's own admin, so
// that a rotation is the admin key rotation through a rotator, with a
// crash after each of its steps, beside the user's requests, a restore,
// the monitor's outage and deletion. Every invariant holds, and "admin
// accepted" holds the stored admin keyring (or the rotator's, mid-way) to
// working at every instant; the test fails unless a rotation completed, a
// crash left the rotation to the next reconcile's recovery with the rotator
// stored, and the set was wound down.
func TestCephAdmin(t *testing.T) {
	explorePolicies(t, Options{CephAdmin: true, Crashes: true, Backups: true, Deletion: true, Only: backendOnly("mon")},
		envInt("REKEY_EXPLORE_CEPH_ADMIN_DEPTH", 6), map[string]func(*World) bool{
			"completed": func(w *World) bool {
				st, key := w.Set.Status, monKey(w)
				return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && key != cephBase+"/k0" && w.AdminKeyring == key
			},
			"rotator stored": func(w *World) bool { return w.RotatorKeyring != "" && w.AdminKeyring != monKey(w) },
			"wound down":     woundDown,
		})
}

// TestCephAdminWalks takes seeded random walks of the Ceph admin world
// among every transition it has.
func TestCephAdminWalks(t *testing.T) {
	walkWorld(t, Options{CephAdmin: true, Crashes: true, Backups: true, Deletion: true, PolicyEdits: true, StaleReads: true}, "the Ceph admin world", 3)
}

// TestCephInPlaceHand: someone rotates client.app's key by hand on the
// monitor, before, during or after a rotation, beside crashes and the
// user's requests. The pod holding the key it replaced is excused until it
// restarts, but every refusal must name a way the state accepts, and the
// documented actions must give the consumers a key the monitor accepts.
func TestCephInPlaceHand(t *testing.T) {
	explorePolicies(t, Options{CephInPlace: true, HandChanges: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "user: recover c1", "consumer", "someone rotates"}},
		envInt("REKEY_EXPLORE_CEPH_HAND_DEPTH", 7), map[string]func(*World) bool{
			"hand key served": func(w *World) bool {
				return w.HandRotated && w.Set.Status.Phase == v1.PhaseIdle && w.Pod.Creds[cephBase] == cephBase+"/hand"
			},
		})
}
