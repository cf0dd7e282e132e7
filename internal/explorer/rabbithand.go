package explorer

import (
	"rekey.io/rekey/internal/engine"
)

// A user's password changed by hand on the broker (option HandChanges in
// the RabbitMQ world): a person runs `rabbitmqctl change_password` on the
// set's current generation's user, or on the new generation's mid-rotation,
// once per path. The password is replaced and the user's tags, so rekey's
// mark, stay: it is still a generation of the set. What the RabbitMQ
// backend then does is already in rabbitmodel.go, which decides by login
// (authenticates: the management API's /api/whoami with the secrets rekey
// holds):
//   - Precheck refuses the hand-changed current user (KeyMismatch, naming
//     recover): testRefusals' "precheck" (TestOnRealBroker);
//   - Retire of a hand-changed pending user refuses (PendingRejected) and
//     keeps the current one, naming the password to set back (the discard
//     began, so it can only complete): testRefusals' "retire keeps the
//     current user when the pending one does not log in";
//   - the user keeps its mark (still a generation) and only the person's
//     password logs in; Verify refuses it (PendingRejected, "run kubectl
//     rekey recover"), so a rotation's distribution and its discard wait;
//     an Apply again, and a Reset, put rekey's password back (ensureUser;
//     the Reset also deletes the other generation); the discard still
//     deletes a hand-changed current user once the pending one logs in;
//     Release keeps the person's password and takes the mark off,
//     Deprovision deletes it; set back to the source Secret's password,
//     it logs in and the precheck passes: TestHandChangeOnRealBroker
//     (internal/backend/rabbitmq hand_test.go) proves each on a real
//     rabbitmq-server.
//
// A consumer refused because of the person's change is the person's doing
// (Account.Hand excuses it in "no lockout", "nothing lost" and "nothing
// left valid after deletion") until rekey writes the user again or the
// person sets it back; "no wedge" still holds the documented actions (the
// person setting it back to the source Secret's password, as `kubectl
// rekey check` and the refusals say, or recover) to bringing the set back
// to Idle with the pod logging in (handOpen).

// rabbitHandPassword is what the person sets.
const rabbitHandPassword = "pw-hand"

// rabbitHandChange: someone changes the password of the user the source
// Secret names under key (the current user, or the pending one) by hand.
func rabbitHandChange(key string) func(*World) bool {
	return func(w *World) bool {
		in := w.instance(broker)
		if !w.rabbit() || in == nil || !in.Present || in.Down || w.Gone || w.HandUser != "" || w.Source == nil {
			return false
		}
		user := string(w.Source.Data[key])
		a := in.acct(user)
		if user == "" || !a.Exists {
			return false
		}
		a.Primary, a.Hand = rabbitHandPassword, true
		in.set(user, a)
		w.HandUser = user
		return true
	}
}

// rabbitHandFix: the person sets the hand-changed user's password back to
// the one the source Secret holds for it (its current or its pending
// password), as `kubectl rekey check` says ("set its password back to the
// source Secret's"). A user the source Secret no longer names is left to
// the refusals' recover.
func rabbitHandFix(w *World) bool {
	in := w.instance(broker)
	if !w.rabbit() || in == nil || !in.Present || in.Down || w.Gone || w.Source == nil {
		return false
	}
	for name, a := range in.Users {
		if !a.Hand || !a.Exists {
			continue
		}
		pw := ""
		switch name {
		case string(w.Source.Data[rabbitUserKey]):
			pw = string(w.Source.Data[rabbitPasswordKey])
		case string(w.Source.Data[engine.PendingKey(rabbitUserKey)]):
			pw = string(w.Source.Data[engine.PendingKey(rabbitPasswordKey)])
		}
		if pw == "" {
			continue
		}
		in.set(name, Account{Exists: true, Primary: pw, Marked: a.Marked})
		return true
	}
	return false
}

// handOpen: the consumer's pod is refused by a user a person changed by
// hand, so the set is not settled yet.
func handOpen(w *World) bool {
	if w.postgres() {
		return pgHandOpen(w) // pghand.go
	}
	if !w.rabbit() || w.HandUser == "" || w.WebGone {
		return false
	}
	in := w.instance(broker)
	for user, pw := range loginsOf(w, w.Pod.Creds) {
		if a := in.acct(user); a.Hand && !a.Accepts(pw) {
			return true
		}
	}
	return false
}

// rabbitHandTransitions are the person's steps.
func rabbitHandTransitions() []Transition {
	return []Transition{
		{"someone changes the current user's password by hand (rabbitmqctl change_password)", rabbitHandChange(rabbitUserKey)},
		{"someone changes the new generation's user's password by hand (rabbitmqctl change_password)", rabbitHandChange(engine.PendingKey(rabbitUserKey))},
		{"someone sets the hand-changed user's password back to the source Secret's", rabbitHandFix},
	}
}

// rabbitFixStep is the drain's: the person sets the user back (in the
// PostgreSQL world, the role: pgFixStep).
func rabbitFixStep(c *World) string {
	if c.postgres() {
		return pgFixStep(c)
	}
	if !rabbitHandFix(c) {
		return ""
	}
	return "someone sets the hand-changed user's password back to the source Secret's, as kubectl rekey check says"
}
