package mysql

import (
	"context"
	"encoding/json"
	"strings"
)

// The generation mark. rekey's statements never replicate, so an instance
// that leaves the cluster with its volume (a StatefulSet scaled in) and
// comes back later holds what rekey made there before it left: the
// passwords of a generation since retired, or both passwords of a
// rotation whose discard it missed, the old one (possibly leaked) still
// valid. Nothing in mysql.user tells that apart from a person's change,
// unless rekey says, in the very statements that change the passwords,
// what they made: each user carries the generation rekey last applied to
// it, and whether that left it with two passwords
// (User_attributes.metadata."rekey.io/applied" = {"gen": N, "dual": b}):
//
//   - Apply and the Distributed repair: {target, dual: true};
//   - Retire: {target, dual: false};
//   - Reset, Provision and a user created with cur: {current, false}.
//
// A user whose mark is older than the set's current generation, or that
// holds rekey's own two passwords of a rotation that has completed, is
// stale: every consumer holds the current password, so each phase first
// sets it back to that one (IDENTIFIED BY current, DISCARD OLD PASSWORD),
// and the Idle upkeep does so as soon as the instance answers (upkeep.go).
// A user whose mark is current or newer is never overwritten: a second
// password there is a person's, or a restore's, and is reported.
const appliedKey = "rekey.io/applied"

const appliedPath = `'$.metadata."` + appliedKey + `"'`

// genMark is a user's mark as read from mysql.user.
type genMark struct {
	Gen  int64 `json:"gen"`
	Dual bool  `json:"dual"`
}

// parseMark reads the mark's JSON ("" or invalid: unmarked).
func parseMark(s string) *genMark {
	if s == "" {
		return nil
	}
	var m genMark
	if err := json.Unmarshal([]byte(s), &m); err != nil || m.Gen <= 0 {
		return nil
	}
	return &m
}

// staleMark: a user marked m missed what the set did since, when its
// current generation is gen (0: unknown, nothing is stale). A mark of the
// current generation with two passwords is the completed rotation's, whose
// discard the user missed; a newer mark (a status restored from an older
// backup) is not rekey's to undo.
func staleMark(m *genMark, gen int64) bool {
	return m != nil && gen > 0 && (m.Gen < gen || m.Gen == gen && m.Dual)
}

// markPatch is the mark of gen (nil when gen is unknown: nothing
// recorded) for an ATTRIBUTE merge patch.
func markPatch(gen int64, dual bool) map[string]any {
	if gen <= 0 {
		return map[string]any{}
	}
	return map[string]any{appliedKey: map[string]any{"gen": gen, "dual": dual}}
}

// attributeTail is " ATTRIBUTE <patch>" for the patches merged, or ""
// when they hold nothing.
func attributeTail(patches ...map[string]any) string {
	all := map[string]any{}
	for _, p := range patches {
		for k, v := range p {
			all[k] = v
		}
	}
	if len(all) == 0 {
		return ""
	}
	return "ATTRIBUTE " + attribute(all)
}

// createdPatch clears the creating/swapping mark (see createdAttribute).
func createdPatch() map[string]any { return map[string]any{"rekey": nil} }

// resetStale sets every user of users that accts says is stale back to
// cur (IDENTIFIED BY, then DISCARD OLD PASSWORD: IDENTIFIED BY alone
// keeps a secondary), marked as the current generation; it reports
// whether it changed any. The mark is written with the DISCARD, the
// second statement: a crash between the two leaves the stale mark, and the
// next phase or upkeep runs both again.
func (s *session) resetStale(ctx context.Context, users []User, accts map[string]account, cur map[string]string) (bool, error) {
	var identify, discard []alteration
	for _, u := range users {
		if a := of(accts, u); a.exists && !a.creating && !a.swapping && staleMark(a.mark, s.gen) {
			identify = append(identify, alteration{u, "IDENTIFIED BY " + quote(cur[u.Key])})
			discard = append(discard, alteration{u, "DISCARD OLD PASSWORD"})
		}
	}
	if len(identify) == 0 {
		return false, nil
	}
	if err := s.alterAll(ctx, identify, ""); err != nil {
		return false, err
	}
	return true, s.alterAll(ctx, discard, attributeTail(markPatch(s.gen, false)))
}

// markUsers records gen on the users named (an ATTRIBUTE-only ALTER USER:
// users created or adopted, whose passwords no other statement changed).
func (s *session) markUsers(ctx context.Context, users []User, gen int64) error {
	tail := attributeTail(markPatch(gen, false))
	if len(users) == 0 || tail == "" {
		return nil
	}
	names := make([]string, len(users))
	for i, u := range users {
		names[i] = u.Account()
	}
	return s.write(ctx, "ALTER USER "+strings.Join(names, ", ")+" "+tail)
}
