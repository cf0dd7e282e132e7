package explorer

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
//
// With HandChanges a person rotates the admin's key by hand (handRotate)
// and may put its current keyring in the admin keyring Secret (putAdmin):
// until then every command is refused (AuthenticationFailed, naming that
// Secret and `ceph auth get`), RecoverAdmin's first, and nothing changes;
// with a rotator stored (and still there) RecoverAdmin rotates the
// person's key away again; with the rotator removed (a crash after step 8)
// it is the admin's refusal too, the rotator keyring kept until the
// person's keyring is put there, then deleted (step 9). Proven on a real
// ceph-mon by internal/backend/ceph TestAdminRotatedByHand
// (hand_model_test.go). A person may also change the rotator's key
// (handChangeRotator, replayed after each of steps 1-7 by
// TestCephAdminRotatorChanged): with the admin's keyring working,
// RecoverAdmin removes the rotator and deletes its keyring (steps 8-9),
// and Apply rotates anew or adopts step 4's key; with it refused too,
// the admin's refusal. Real ceph-mon: TestRecoverAdminRotatorChanged.
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
		return nil, &engine.Refusal{Reason: string(reason.AuthenticationFailed), Message: "the monitors refused the key of " + cephBase + " in the admin keyring Secret (cephx authentication failed); nothing was changed: the key was rotated or deleted in the cluster (by a person, or by another CredentialSet that rotates " + cephBase + "), or the Secret holds another entity's key. " + putAdminKeyring}
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
	case adminOK && !in.acct(cephRotator).Accepts(w.RotatorKeyring):
		// The rotator's key changed by a person (handChangeRotator) before
		// step 4 or after step 7: steps 8 and 9 (the backend's
		// dropRotator), the admin's keyring working throughout; Apply then
		// rotates from step 1 again, or adopts the key step 4 made.
		if err := fence(ctx); err != nil {
			return err
		}
		delete(in.Users, cephRotator)
		failpoint.Hit("ceph-admin/step-8")
		w.RotatorKeyring = ""
		failpoint.Hit("ceph-admin/step-9")
		return nil
	case !adminOK && !in.acct(cephRotator).Accepts(w.RotatorKeyring):
		// Both refused (the rotator removed at step 8, then the admin's
		// key rotated by hand): the admin's refusal, the rotator keyring
		// kept until the person puts the admin's keyring back (then step 9).
		_, err := b.adminIn()
		if r, ok := err.(*engine.Refusal); ok {
			return &engine.Refusal{Reason: r.Reason, Message: r.Message + "; " + rotatorRefusedToo}
		}
		return err
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
// beside it, with which the next reconcile finishes. A keyring whose key
// a person rotated away by hand (handRotate) is the person's doing: what rekey owes then is to say so (adminIn's refusal),
// and "no wedge" holds it to that.
func cephAdminAccepted(w *World) string {
	in := w.instance(cephMon)
	if in.acct(cephBase).Accepts(w.AdminKeyring) || w.RotatorKeyring != "" && in.acct(cephRotator).Accepts(w.RotatorKeyring) {
		return ""
	}
	if slices.Contains(w.RotatedAway, w.AdminKeyring+awaySep+byHand) || rotatorChangedByHand(w) {
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

// putAdminKeyring is the way out the backend's refusal of the stored admin
// keyring names (ceph's adminError).
const putAdminKeyring = "Put " + cephBase + "'s current keyring there (ceph auth get " + cephBase + ")"

// putAdminStep is what that refusal asks of a person who rotated the
// admin's key by hand (handRotate): put its current keyring in the admin
// keyring Secret ("no wedge" takes it).
func putAdminStep(c *World) string {
	if !slices.ContainsFunc(c.Warnings, func(m string) bool { return strings.Contains(m, putAdminKeyring) }) || !putAdmin(c) {
		return ""
	}
	return "user: puts " + cephBase + "'s current keyring in the admin keyring Secret, as the refusal says"
}

// putAdmin: the person who rotated the admin's key by hand puts its
// current keyring (ceph auth get) in the admin keyring Secret, which holds
// the key they rotated away; or the one who changed the rotator's key
// between steps 4 and 7, the admin's new key then in the cluster only.
func putAdmin(w *World) bool {
	in := w.instance(cephMon)
	if !w.cephAdmin() || in == nil || !in.Present || w.Gone {
		return false
	}
	if !slices.Contains(w.RotatedAway, w.AdminKeyring+awaySep+byHand) && (!rotatorChangedByHand(w) || in.acct(cephBase).Accepts(w.AdminKeyring)) {
		return false
	}
	w.AdminKeyring = in.acct(cephBase).Primary
	return true
}

// cephAdminHandAfterStep8 lets the person rotate the admin's key by hand
// between steps 8 and 9 of an admin rotation (a crash after step 8: the
// rotator removed, its keyring still stored). Found with it on
// (2026-12-01): RecoverAdmin retried step 3 with the removed rotator's
// keyring at every reconcile (BackendError, "the stored rotator keyring
// finishes it on the next reconcile"), never naming the admin keyring
// Secret ("no wedge", 3 steps). Now both refused give the admin's refusal
// (recoverAdmin above; on a real ceph-mon TestAdminRotatedByHand's "rotator
// removed", and test/e2e TestCephAdminHandAfterStep8 with the manager
// killed after step 8), and the explorer explores the window.
var cephAdminHandAfterStep8 = true

// rotatorRefusedToo is what the admin's refusal adds when the stored
// rotator keyring is refused too (ceph's rotatorRefusedToo).
const rotatorRefusedToo = "the stored " + cephRotator + " keyring is refused too, so it cannot finish the interrupted rotation"

// handChangeRotator: a person changes client.admin-rotator's key by hand
// (ceph auth rotate) while an interrupted admin rotation left it in the
// cluster, once per path; the stored rotator keyring is then refused.
// Not the admin's own hand rotation: that stays possible on the path.
func handChangeRotator(w *World) bool {
	in := w.instance(cephMon)
	if !w.cephAdmin() || in == nil || !in.Present || w.Gone || slices.ContainsFunc(w.RotatedAway, func(k string) bool {
		return strings.HasPrefix(k, cephRotator+cephKeySep)
	}) {
		return false
	}
	admin := w.HandRotated
	ok := rotateByHand(w, in, cephRotator)
	w.HandRotated = admin
	return ok
}

// rotatorChangedByHand: the rotator keyring stored is one a person
// rotated away (handChangeRotator); like the admin's, refusing it is the
// person's doing, and rekey owes the refusal that names the way out.
func rotatorChangedByHand(w *World) bool {
	return w.RotatorKeyring != "" && slices.Contains(w.RotatedAway, w.RotatorKeyring+awaySep+byHand)
}

// adminHandWindow: w is between steps 8 and 9 of an admin rotation.
func adminHandWindow(w *World) bool {
	return w.cephAdmin() && w.RotatorKeyring != "" && !w.instance(cephMon).acct(cephRotator).Exists
}
