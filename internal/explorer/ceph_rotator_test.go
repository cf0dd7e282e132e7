package explorer

import (
	"fmt"
	"testing"

	"rekey.io/rekey/internal/engine"
)

// TestCephAdminRotatorChanged: an admin rotation stopped by a crash after
// each of steps 1 to 7, then a person changes client.admin-rotator's key
// by hand (handChangeRotator), and the admin world explores on from there
// (the person may still rotate the admin's key too). With the admin's
// keyring working (steps 1-3 and 7) the stored rotator keyring can no
// longer run step 3; with it refused too (steps 4-6) only the admin's
// current keyring, put in its Secret, brings rekey back. Every refusal
// must name a way the state accepts, and the documented actions must
// bring the set back to Idle ("no wedge"). The test fails unless the
// admin's rotation went on to its pending key with the rotator gone, and,
// stopped after steps 4-6, the admin's refusal said the rotator keyring is
// refused too.
func TestCephAdminRotatorChanged(t *testing.T) {
	o := Options{CephAdmin: true, HandChanges: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "user: recover c1", "consumer", "someone "}}
	depth := envInt("REKEY_EXPLORE_CEPH_ROTATOR_DEPTH", 4)
	for step := 1; step <= 7; step++ {
		t.Run(fmt.Sprintf("step-%d", step), func(t *testing.T) {
			at := fmt.Sprintf("ceph-admin/step-%d", step)
			w := replay(t, o, []Transition{
				{"user: rotate r1", annotate(engine.RotateAnnotation, "r1")},
				{"manager crashes after " + at, crashAfter(at)},
				{"someone changes " + cephRotator + "'s key by hand", handChangeRotator},
			})
			reach := map[string]func(*World) bool{
				// Apply rotated the admin again (before step 4) or adopted
				// the key step 4 made: the admin keyring stored is the
				// rotation's pending key, the rotator gone.
				"the admin's new key pending, the rotator gone": func(w *World) bool {
					p := string(w.Source.Data[engine.PendingKey(cephBase)])
					return p != "" && p == w.AdminKeyring && w.RotatorKeyring == "" && !w.instance(cephMon).acct(cephRotator).Exists
				},
			}
			if step >= 4 && step <= 6 {
				reach["both refused, naming the admin keyring Secret"] = func(w *World) bool {
					return rotatorChangedByHand(w) && says(w, putAdminKeyring+"; "+rotatorRefusedToo)
				}
			}
			reached := map[string]bool{}
			o.Observe = func(w *World) {
				for name, ok := range reach {
					reached[name] = reached[name] || ok(w)
				}
			}
			exploreFrom(t, w, o, depth)
			for name := range reach {
				if !reached[name] {
					t.Errorf("never reached: %s", name)
				}
			}
		})
	}
}

// crashAfter reconciles until one crashes the manager right after the
// step at (its first pass), as a crash transition does.
func crashAfter(at string) func(*World) bool {
	return func(w *World) bool {
		for range 4 {
			if _, err := w.Reconcile(at + "#1"); err == errCrashed {
				return true
			}
		}
		return false
	}
}
