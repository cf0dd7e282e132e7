package explorer

import (
	"fmt"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// An adopted user in the RabbitMQ world (option Adopt, spec.rabbitmq.adopt):
// legacy exists on the broker before rekey, without any mark, and the
// Secret spec.rabbitmq.adopt.passwordSecretRef names holds its password
// (rabbitAdopt). What the RabbitMQ backend does with it (adopt.go,
// rotation.go, and rabbitkube's build), carried out on the model:
//   - while the set has not provisioned (status.keyGeneration 0) and is
//     not deleted, the build proves the password logs in as the user
//     (ProvisionFailed if the user is missing or refuses it) and hands
//     the user and password to provisioning (registry.Plan.Adopt), which
//     stores them as generation 1;
//   - Provision claims it: proves it again and adds the set's mark,
//     keeping its password (the stored hash), tags and grants;
//     Provisioned.Adopted;
//   - a rotation makes <base>-g2 beside it (Precheck and Apply as for any
//     current user) and the discard deletes it once <base>-g2 logs in;
//   - a reset of the adopted current user (a rolled-back first rotation,
//     recover) refuses it without the mark (NotOwned), writes nothing
//     when it logs in, sets its password back keeping its tags (so the
//     mark) when it does not, and creates it anew, marked, as ensureUser
//     does, when it is gone; the other generations are deleted as ever;
//   - Release (deletionPolicy Discard) takes the mark off and keeps its
//     password, as for any current user; Deprovision (Delete) deletes
//     every generation and hands an adopted current user back without the
//     mark (it existed before rekey).
//
// Proven on a real rabbitmq-server: TestOwnershipOnRealBroker's "an
// adopted user is generation 1 and retired after the first rotation"
// (testAdoptLifecycle: the proof and its refusals, the mark added with the
// hash kept, a reset of a hand-changed adopted user keeping its tags, the
// rotation, the discard deleting it, a Retire again after a crash) and
// "a user several sets adopted" (testAdoptShared's hand-back: Deprovision
// of a set that never rotated); TestAdoptModelOnRealBroker
// (internal/backend/rabbitmq adopt_model_test.go): Release and
// Deprovision mid-rotation, a reset that writes nothing, one that creates
// a deleted adopted user anew with the mark, one refused without the
// mark, the precheck beside a generation the status does not account for.
// Several sets adopting one user (each its own mark, the last deleting
// it) is not modelled: the model's mark is one flag.

// adopter is a model backend whose build hands provisioning the secrets
// it adopts (registry.Plan.Adopt).
type adopter interface {
	adoption() (engine.Secrets, error)
}

// adopted is spec.rabbitmq.adopt.user, "" without one.
func (b *rabbitBackend) adopted() string { return b.cs.Annotations[RabbitAdoptAnnotation] }

// isAdopted: user, as the set's current user, is not one of its
// generations (the backend's isAdopted).
func (b *rabbitBackend) isAdopted(user string) bool {
	_, gen := rabbitGenerationOf(rabbitBaseOf(b.cs), user)
	return !gen
}

// adoption is rabbitkube's build: before the set provisioned, the adopted
// user's password is proven on the broker, and handed to provisioning.
func (b *rabbitBackend) adoption() (engine.Secrets, error) {
	user := b.adopted()
	if user == "" || !b.cs.DeletionTimestamp.IsZero() || b.cs.Status.KeyGeneration != 0 {
		return nil, nil
	}
	in, err := b.broker()
	if err != nil {
		return nil, err
	}
	if err := b.prove(in, user, rabbitAdoptedPassword); err != nil {
		return nil, err
	}
	return engine.Secrets{rabbitUserKey: user, rabbitPasswordKey: rabbitAdoptedPassword}, nil
}

// prove: the user exists and pw logs in as it.
func (b *rabbitBackend) prove(in *Instance, user, pw string) error {
	a := in.acct(user)
	if !a.Exists {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf("user %s named in spec.rabbitmq.adopt.user does not exist on %s, so nothing was adopted or changed", user, broker)}
	}
	if !a.Accepts(pw) {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf("the password in the Secret named in spec.rabbitmq.adopt.passwordSecretRef does not log in as user %s on %s, so rekey did not adopt the user and changed nothing", user, broker)}
	}
	return nil
}

// provisionAdopted is Provision of the adopted user: claimed (proven,
// the mark added, its password kept), generation 1, adopted.
func (b *rabbitBackend) provisionAdopted(in *Instance, user, pw string) (engine.Provisioned, error) {
	if err := b.prove(in, user, pw); err != nil {
		return engine.Provisioned{}, err
	}
	if a := in.acct(user); !a.Marked {
		a.Marked = true
		in.set(user, a)
		failpoint.Hit("provision/rabbitmq-user-marked")
	}
	return engine.Provisioned{Secrets: engine.Secrets{rabbitUserKey: user, rabbitPasswordKey: pw}, Generation: 1, Adopted: true}, nil
}

// resetAdopted is the backend's: an adopted current user without the
// mark is refused; one that is gone is made as a generation would be;
// one that logs in is left as it is; otherwise its password is set back,
// its tags (so the mark) kept.
func (b *rabbitBackend) resetAdopted(in *Instance, step, user, pw string) error {
	a := in.acct(user)
	switch {
	case a.Exists && !a.Marked:
		return b.notOwned(user)
	case !a.Exists:
		return b.ensure(in, step, user, pw)
	case a.Accepts(pw):
		return nil
	}
	in.set(user, Account{Exists: true, Primary: pw, Marked: a.Marked})
	failpoint.Hit(step + "/rabbitmq-user-put")
	return nil
}

// rabbitAdoptedLeftValid is "nothing left valid after deletion" for the
// adopted user: it existed before rekey, so it may stay, but never with
// the set's mark, and, when it is what the consumers were given, with
// the password they were given.
func rabbitAdoptedLeftValid(w *World) string {
	in, user := w.instance(broker), w.Set.Annotations[RabbitAdoptAnnotation]
	if user == "" || in == nil || !in.Present || w.returned(in) {
		return ""
	}
	a := in.acct(user)
	if !a.Exists || a.Hand {
		return ""
	}
	if a.Marked {
		return fmt.Sprintf("the set is %s (deletionPolicy %s) and its adopted user %s still carries its mark", goneOrEmptied(w), w.Set.Spec.OnDeletion(), user)
	}
	if w.Dist != nil && string(w.Dist.Data[rabbitUserKey]) == user && !a.Accepts(string(w.Dist.Data[rabbitPasswordKey])) {
		return fmt.Sprintf("the set is %s (deletionPolicy %s) and its adopted user %s refuses what its consumers were given", goneOrEmptied(w), w.Set.Spec.OnDeletion(), user)
	}
	return ""
}
