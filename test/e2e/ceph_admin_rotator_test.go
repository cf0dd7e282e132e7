package e2e

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCephAdminRotatorChanged: a set that rotates rekey's own admin
// entity; the real manager is SIGKILLed right after the admin rotation's
// step 2 (the rotator made and its keyring stored, the admin's key as it
// was) or step 7 (the admin's new keyring stored, the rotator still
// there), then a person rotates client.admin-rotator's key on the mon. A
// fresh manager removes the rotator and deletes its keyring Secret
// (AdminRotationRecovered), never AdminRotationFailed, and the rotation
// goes on to Idle with an admin key the admin keyring Secret holds and
// the mon accepts: rotated anew after step 2, the one step 4 made after
// step 7. Before, every reconcile retried step 3 with the stored rotator
// keyring the mon refuses (BackendError, "the stored rotator keyring
// finishes it on the next reconcile"). internal/explorer
// TestCephAdminRotatorChanged, ceph TestRecoverAdminRotatorChanged.
func TestCephAdminRotatorChanged(t *testing.T) {
	for _, fp := range []string{"ceph-admin/step-2", "ceph-admin/step-7"} {
		t.Run(fp[len("ceph-admin/"):], func(t *testing.T) {
			// A mon each: the other subtest's set, deleted with no manager
			// left to wind it down, still holds the admin entity on its own.
			c := testenv.CephForTest(t)
			flags := []string{"--ceph-work-dir", c.Dir.Host, "--ceph-cli", c.CLIPath}
			ns := newNamespace(t)
			const name = "selfrot"
			cs := cephSet(t, c, ns, name, v1.CephInPlace, v1.CephEntity{Name: cephAdminEntity, Caps: adminCaps})
			cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout, GracePeriod: &metav1.Duration{Duration: time.Second}}
			cs.Spec.ConsumerGroups = []v1.ConsumerGroup{ackerGroup("node-1")}
			if err := k8s.Create(ctxT(t), cs); err != nil {
				t.Fatal(err)
			}
			deleteAtEnd(t, cs)
			ackEveryDistribution(t, ns, name, "node-1")
			adminSecret := cs.Spec.Ceph.Admin.KeyringSecretRef.Name

			m := startManagerProcessWith(t, "", flags...)
			before := assertCephSecrets(t, c, waitPhase(t, ns, name, v1.PhaseIdle, 1), cephAdminEntity)[cephAdminEntity]
			m.stop()

			m = startManagerProcessWith(t, fp, flags...)
			rotate(t, ns, name, "r1")
			m.waitKilled(t, fp)
			if _, ok := monKeys(t, c)[ceph.RotatorEntity]; !ok || len(rotatorKeyring(t, ns, adminSecret)) == 0 || storedKeyringAdministers(t, c, ns, adminSecret) != cephAdminEntity {
				t.Fatalf("killed at %s: want the rotator there, its keyring stored, the admin keyring stored working", fp)
			}
			stored := monKeys(t, c)[cephAdminEntity]
			handRotate(t, c, ceph.RotatorEntity)

			restartedAt := time.Now()
			m = startManagerProcessWith(t, "", flags...)
			mustContain(t, "the recovery", waitEventSince(t, ns, name, string(reason.AdminRotationRecovered), restartedAt), "removed "+ceph.RotatorEntity)
			got := assertCephSecrets(t, c, waitPhase(t, ns, name, v1.PhaseIdle, 2), cephAdminEntity)[cephAdminEntity]
			if got == before || (fp == "ceph-admin/step-7") != (got == stored) {
				t.Fatalf("generation 2's admin key: rotated anew=%v, want %v", got != stored, fp == "ceph-admin/step-2")
			}
			if _, key := keyOf(t, secretData(t, ns, adminSecret)["keyring"]); key != got || !administers(t, c, cephAdminEntity, key) {
				t.Fatal("the admin keyring Secret does not hold the admin's working key")
			}
			if _, ok := monKeys(t, c)[ceph.RotatorEntity]; ok || len(rotatorKeyring(t, ns, adminSecret)) != 0 {
				t.Fatal("something of the rotator outlived the recovery")
			}
			if n := eventsSince(t, ns, name, reason.AdminRotationFailed, restartedAt); n != 0 {
				t.Fatalf("%d AdminRotationFailed events after the restart", n)
			}
			m.stop()
		})
	}
}
