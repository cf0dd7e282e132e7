package explorer

import (
	"context"
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// The Ceph admin world (option CephAdmin): the InPlace world whose one
// entity, client.app, is also the admin rekey runs every command as, so
// rotating it is the admin key rotation of the Ceph backend (admin.go):
// a client.admin-rotator with admin caps is made and its keyring stored
// (steps 1-2), the admin's key rotated with it, proven, stored (steps
// 3-7), and the rotator removed and its keyring deleted (steps 8-9), a
// crash possible after each. Every command runs with the admin keyring
// stored (AdminKeyring: a Secret the user provides), and before any, each
// reconcile finishes an interrupted rotation (RecoverAdmin, run where the
// backend is built). Each step is proven on a real ceph-mon by
// internal/backend/ceph TestAdminRotation and TestAdminRotationCrash, and
// test/e2e TestCephAdminRotationCrash (the manager killed after each step).
const (
	CephAdminWorld = "ceph-admin"
	cephRotator    = "client.admin-rotator"
)

func (w *World) cephAdmin() bool { return w.Set.Annotations[Annotation] == CephAdminWorld }

func init() {
	registerWorldWith(CephAdminWorld, func(ctx context.Context, cs *v1.CredentialSet, k registry.Kube) (engine.Backend, error) {
		b := &cephInPlaceBackend{cephBackend{w: active, cs: cs}}
		return b, b.recoverAdmin(ctx, k.Fence)
	})
	for i := 1; i <= 9; i++ {
		crashPoints[fmt.Sprintf("ceph-admin/step-%d", i)] = true
	}
}

// adminIn is the monitor, reached with the stored admin keyring: refused,
// rekey can do nothing there (AuthenticationFailed, naming the Secret).
func (b *cephInPlaceBackend) adminIn() (*Instance, error) {
	in, err := b.mon()
	if err != nil || !b.w.cephAdmin() {
		return in, err
	}
	if !in.acct(cephBase).Accepts(b.w.AdminKeyring) {
		return nil, &engine.Refusal{Reason: string(reason.AuthenticationFailed), Message: "the monitors refused the key of " + cephBase + " in the admin keyring Secret (cephx authentication failed); nothing was changed: put " + cephBase + "'s current keyring there (ceph auth get " + cephBase + ")"}
	}
	return in, nil
}

// recoverAdmin is RecoverAdmin. fence is the set's, which the backend
// asks before every command that changes the cluster (a manager that lost
// its lease, or read the set before its last status change, changes
// nothing).
func (b *cephInPlaceBackend) recoverAdmin(ctx context.Context, fence func(context.Context) error) error {
	in, err := b.mon()
	if err != nil {
		return err
	}
	w := b.w
	stored := w.RotatorKeyring != ""
	adminOK := in.acct(cephBase).Accepts(w.AdminKeyring)
	rotatorExists := in.acct(cephRotator).Exists
	switch {
	case !stored && !adminOK:
		_, err := b.adminIn()
		return err
	case !stored && !rotatorExists:
		return nil
	case !stored:
		if err := fence(ctx); err != nil {
			return err
		}
		delete(in.Users, cephRotator) // its keyring was never stored: nobody can use it
		return nil
	case adminOK && !rotatorExists:
		w.RotatorKeyring = "" // step 9 was all that was missing
		failpoint.Hit("ceph-admin/step-9")
		return nil
	}
	if err := fence(ctx); err != nil {
		return err
	}
	_, err = b.rotateWithRotator(in, w.RotatorKeyring)
	return err
}

// rotateAdmin is steps 1 and 2: the rotator made (or kept, get-or-create)
// and its keyring stored; then the rotation with it.
func (b *cephInPlaceBackend) rotateAdmin(in *Instance) (string, error) {
	r := in.acct(cephRotator)
	if !r.Exists {
		n := in.acct(cephBase).Gen + 1
		r = Account{Exists: true, Primary: fmt.Sprintf("%s%sk%d", cephRotator, cephKeySep, n)}
		in.set(cephRotator, r)
	}
	failpoint.Hit("ceph-admin/step-1")
	b.w.RotatorKeyring = r.Primary
	failpoint.Hit("ceph-admin/step-2")
	return b.rotateWithRotator(in, r.Primary)
}

// rotateWithRotator is steps 3 (the rotator logs in) to 9.
func (b *cephInPlaceBackend) rotateWithRotator(in *Instance, rotator string) (string, error) {
	if !in.acct(cephRotator).Accepts(rotator) {
		return "", fmt.Errorf("admin rotation step 3 (%s auth ls): cephx authentication failed", cephRotator)
	}
	failpoint.Hit("ceph-admin/step-3")
	key := b.rotate(in)
	failpoint.Hit("ceph-admin/step-4")
	failpoint.Hit("ceph-admin/step-5") // the new key lists the auth database
	failpoint.Hit("ceph-admin/step-6") // the session's keyring file
	b.w.AdminKeyring = key
	failpoint.Hit("ceph-admin/step-7")
	delete(in.Users, cephRotator)
	failpoint.Hit("ceph-admin/step-8")
	b.w.RotatorKeyring = ""
	failpoint.Hit("ceph-admin/step-9")
	return key, nil
}

// cephAdminAccepted is "admin accepted" for the admin world: the monitor
// accepts the admin keyring stored, or, mid-rotation, the rotator's stored
// beside it, with which the next reconcile finishes.
func cephAdminAccepted(w *World) string {
	in := w.instance(cephMon)
	if in.acct(cephBase).Accepts(w.AdminKeyring) || w.RotatorKeyring != "" && in.acct(cephRotator).Accepts(w.RotatorKeyring) {
		return ""
	}
	return "the monitor accepts neither the admin keyring stored nor a rotator keyring stored"
}

// NewCephAdminWorld is the InPlace world whose entity is rekey's admin,
// its keyring in the admin Secret.
func NewCephAdminWorld() *World {
	w := NewCephInPlaceWorld()
	w.Set.Annotations[Annotation] = CephAdminWorld
	w.AdminKeyring = w.Instances[0].acct(cephBase).Primary
	return w
}
