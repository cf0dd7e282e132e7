package e2e

import (
	"os"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// TestPausedLeaderCeph: the paused-leader scenario at Ceph's mutating
// steps, on a real mon. In-place rotate: the old leader stops right
// before `ceph auth rotate`; when it wakes, the new leader has rotated the
// key twice (r1, r2) and distributed it, so a third rotate would kill the
// key consumers were just given: the term kept in config-key refuses it.
// Admin rotation: the old leader stops before the rotator rotates the
// admin's key (step 3); the new leader recovers that rotation, completes
// r1 and rotates again in r2, deleting the rotator each time. Abort
// (Overlapping): r1's generation entity is made, then r1 is aborted; the
// old leader stops in the reset, with the generations newer than the
// current one picked for deletion; the new leader deletes r1's and makes
// r2's under the same name, so the woken leader's `auth rm` would delete
// the entity r2 distributed: the term refuses it. Its control (no fence,
// the entity is deleted) runs with REKEY_HA_CONTROL=1: each Ceph row costs
// minutes of CLI starts on a loaded machine.
func TestPausedLeaderCeph(t *testing.T) {
	c := testenv.CephForTest(t)
	// A longer lease than leaderFlags': the ceph CLI is slow on a loaded
	// machine, and a new leader that misses its renew deadline there
	// exits, leaving the set with no manager at all.
	flags := []string{"--ceph-work-dir", c.Dir.Host, "--ceph-cli", c.CLIPath,
		"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=8s"}
	// What the source Secret holds that the mon must accept: each
	// entity's pending key while there is one (in place, the current one
	// died when it rotated), else its current key.
	refused := func(t *testing.T, data map[string][]byte) []string {
		var bad []string
		for k, v := range data {
			if strings.HasSuffix(k, engine.PendingSuffix) || !strings.Contains(k, ".") {
				continue
			}
			if pv, ok := data[k+engine.PendingSuffix]; ok {
				v = pv
			}
			entity, key := keyOf(t, v)
			if !cephAuthenticates(t, c, entity, key) {
				bad = append(bad, entity)
			}
		}
		return bad
	}
	overlapping := func(t *testing.T, ns, name string) *v1.CredentialSet {
		return cephSet(t, c, ns, name, v1.CephOverlapping, v1.CephEntity{Name: "client." + name, Caps: v1.CephCaps{Mon: "allow r"}})
	}
	rows := []pausedRow{
		{name: "hacephip", failpoint: "ceph/entity-rotating", reach: true,
			set: func(t *testing.T, ns, name string) *v1.CredentialSet {
				return cephSet(t, c, ns, name, v1.CephInPlace, v1.CephEntity{Name: "client." + name, Caps: v1.CephCaps{Mon: "allow r"}})
			}},
		{name: "hacephadmin", failpoint: "ceph-admin/step-3",
			set: func(t *testing.T, ns, name string) *v1.CredentialSet {
				return cephSet(t, c, ns, name, v1.CephInPlace,
					v1.CephEntity{Name: cephAdminEntity, Caps: adminCaps},
					v1.CephEntity{Name: "client." + name, Caps: v1.CephCaps{Mon: "allow r"}})
			}},
		{name: "hacephab", failpoint: "reset/ceph-generations-doomed", inAbort: true, reach: true, set: overlapping},
	}
	if os.Getenv("REKEY_HA_CONTROL") == "1" {
		rows = append(rows, pausedRow{name: "hacephctl", failpoint: "reset/ceph-generations-doomed", inAbort: true, unfenced: true, set: overlapping})
	}
	for _, r := range rows {
		set := r.set
		r.set = func(t *testing.T, ns, name string) *v1.CredentialSet {
			cs := set(t, ns, name)
			cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardManual}
			return cs
		}
		r.refused, r.flags = refused, flags
		t.Run(r.label(), func(t *testing.T) { runPausedRow(t, r) })
	}
}
