package explorer

import (
	"rekey.io/rekey/internal/engine"
)

// A role's password changed by hand in the PostgreSQL world (options
// Postgres and HandChanges): a person runs ALTER ROLE ... PASSWORD on the
// primary, on the current generation's login role of the first login, or
// on the new generation's mid-rotation, once per path. The password is
// replaced; the role's comment, so rekey's mark, and its membership in
// the group stay, and the replica replays it (a paused one keeps what it
// had). Sessions already open as the role go on (PostgreSQL checks a
// password only when a session starts), so the pod's keeps holding a drop
// back as before. What the backend then does is pgmodel.go's, deciding by
// login on every instance:
//   - Precheck refuses the hand-changed current login (KeyMismatch,
//     naming recover), and so does the upkeep at rest (pgupkeep.go,
//     naming both ways back: the password set back, or recover);
//   - Verify refuses a hand-changed pending login (PendingRejected, "run
//     kubectl rekey recover"), so the distribution and the discard wait;
//     Retire refuses it (PendingRejected) and keeps the current login,
//     naming the pending password to set back (the discard began);
//   - an Apply again and a Reset put rekey's password back (ensureLogin's
//     ALTER ROLE ... WITH LOGIN PASSWORD); the discard drops a
//     hand-changed current login once the pending one logs in and no
//     session uses it; Release keeps the person's password and takes the
//     mark off; Deprovision drops it.
//
// Each is proven on a real primary and replica by TestModelHandChange
// (internal/backend/postgres model_hand_test.go); the upkeep's report by
// TestRepairIdleOnRealPostgres. A consumer refused because of the
// person's change is theirs (Account.Hand), as in the RabbitMQ world
// (rabbithand.go); "no wedge" holds the documented actions (the password
// set back to the source Secret's, as `kubectl rekey check` and the
// refusals say, or recover) to bringing the set back to Idle with the pod
// logging in (handOpen).

// pgHandPassword is what the person sets.
const pgHandPassword = "pw-hand"

// pgHandChange: someone changes, on the primary, the password of the
// first login's role the source Secret names under its username key
// (pending: under its pending key).
func pgHandChange(pending bool) func(*World) bool {
	return func(w *World) bool {
		p := pgPrimaryIn(w)
		if !w.postgres() || p == nil || !p.Present || p.Down || w.Gone || w.HandUser != "" || w.Source == nil {
			return false
		}
		key := pgLoginsOf(w.Set)[0].userKey()
		if pending {
			key = engine.PendingKey(key)
		}
		user := string(w.Source.Data[key])
		a := p.acct(user)
		if user == "" || !a.Exists || a.Primary == "" {
			return false // missing, or NOLOGIN (terminateSessions' drop under way): nothing logs in to change
		}
		a.Primary, a.Hand = pgHandPassword, true
		p.set(user, a)
		w.HandUser = user
		pgSync(w)
		return true
	}
}

// pgHandFix: the person sets the hand-changed role's password back, on
// the primary, to the one the source Secret holds for it (its login's
// current or pending password). A role the source Secret no longer names
// is left to the refusals' recover.
func pgHandFix(w *World) bool {
	p := pgPrimaryIn(w)
	if !w.postgres() || p == nil || !p.Present || p.Down || w.Gone || w.Source == nil {
		return false
	}
	a := p.acct(w.HandUser)
	if w.HandUser == "" || !a.Hand || !a.Exists || a.Primary == "" {
		return false
	}
	for _, l := range pgLoginsOf(w.Set) {
		for _, k := range []string{l.userKey(), engine.PendingKey(l.userKey())} {
			if string(w.Source.Data[k]) != w.HandUser {
				continue
			}
			pw := string(w.Source.Data[l.passwordKey()])
			if k != l.userKey() {
				pw = string(w.Source.Data[engine.PendingKey(l.passwordKey())])
			}
			if pw == "" {
				return false
			}
			p.set(w.HandUser, Account{Exists: true, Primary: pw, Marked: a.Marked})
			pgSync(w)
			return true
		}
	}
	return false
}

// pgHandOpen: the consumer's pod holds a role a person changed by hand,
// which refuses what it holds.
func pgHandOpen(w *World) bool {
	if w.HandUser == "" || w.WebGone {
		return false
	}
	p := pgPrimaryIn(w)
	for user, pw := range pgCredLogins(w, w.Pod.Creds) {
		if a := p.acct(user); a.Hand && !a.Accepts(pw) {
			return true
		}
	}
	return false
}

// pgHandTransitions are the person's steps.
func pgHandTransitions() []Transition {
	return []Transition{
		{"someone changes the current login role's password by hand (ALTER ROLE ... PASSWORD)", pgHandChange(false)},
		{"someone changes the new generation's login role's password by hand (ALTER ROLE ... PASSWORD)", pgHandChange(true)},
		{"someone sets the hand-changed login role's password back to the source Secret's", pgHandFix},
	}
}

// pgFixStep is the drain's: the person sets the role back.
func pgFixStep(c *World) string {
	if !pgHandFix(c) {
		return ""
	}
	return "someone sets the hand-changed login role's password back to the source Secret's (ALTER ROLE, on the primary), as kubectl rekey check says"
}
