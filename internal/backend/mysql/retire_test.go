package mysql

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestPlanRetire: Retire's decision on one instance from mysql.user's rows
// and the logins tried. Every user refusing pending (and not one that
// missed phase 1) is named, and then nothing is discarded there.
func TestPlanRetire(t *testing.T) {
	a, b, c := User{Name: "a", Host: "%", Key: "A"}, User{Name: "b", Host: "%", Key: "B"}, User{Name: "c", Host: "%", Key: "C"}
	local := User{Name: "l", Host: "localhost", Key: "L"}
	users := []User{a, b, c, local}
	refused := &loginRefused{inst: "db-1", user: "x"}
	down := errors.New("db-1 is unreachable")
	dual := account{exists: true, dual: true}
	single := account{exists: true}
	// accts files rows by user name (all hosts are % but local's).
	accts := func(m map[string]account) map[string]account {
		out := map[string]account{}
		for _, u := range users {
			if acct, ok := m[u.Name]; ok {
				out[accountKey(u.Name, u.Host)] = acct
			}
		}
		return out
	}
	all := func(acct account) map[string]account {
		return accts(map[string]account{"a": acct, "b": acct, "c": acct, "l": acct})
	}
	ok := map[string]error{"A": nil, "B": nil, "C": nil}
	names := func(us []User) []string {
		var out []string
		for _, u := range us {
			out = append(out, u.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name                    string
		accts                   map[string]account
		pending, cur            map[string]error
		create, retain, discard []string
		refusal                 []string // accounts the refusal must name, in order
		notNamed                []string
		err                     error
	}{
		{name: "every user dual, pending accepted: all discarded", accts: all(dual), pending: ok,
			discard: []string{"a", "b", "c", "l"}},
		{name: "re-run after the discard: nothing left", accts: all(single), pending: ok},
		{name: "missed phase 1: retain then discard", accts: all(single),
			pending: map[string]error{"A": refused, "B": nil, "C": refused}, cur: map[string]error{"A": nil, "C": nil},
			retain: []string{"a", "c"}, discard: []string{"a", "c"}},
		{name: "two users refuse pending: both named, nothing done", accts: all(dual),
			pending: map[string]error{"A": refused, "B": nil, "C": refused},
			refusal: []string{"a@%", "c@%"}, notNamed: []string{"b@%"}},
		{name: "single, refuses pending and cur: named", accts: all(single),
			pending: map[string]error{"A": nil, "B": refused, "C": nil}, cur: map[string]error{"B": refused},
			refusal: []string{"b@%"}, notNamed: []string{"a@%", "c@%"}},
		{name: "a refusal wins over an instance gone away", accts: all(dual),
			pending: map[string]error{"A": down, "B": refused, "C": nil}, refusal: []string{"b@%"}},
		{name: "an instance gone away: its error, not a refusal", accts: all(dual),
			pending: map[string]error{"A": nil, "B": down, "C": down}, err: down},
		{name: "cur login gone away: its error", accts: all(single),
			pending: map[string]error{"A": refused, "B": nil, "C": nil}, cur: map[string]error{"A": down}, err: down},
		{name: "pending not tried: refused, never discarded unproven", accts: all(dual),
			pending: map[string]error{"B": nil, "C": nil}, refusal: []string{"a@%"}},
		{name: "missing users created, creations finished after them",
			accts: accts(map[string]account{"b": {exists: true, dual: true, creating: true}, "l": dual}), pending: map[string]error{"B": nil},
			create: []string{"a", "c", "b"}, discard: []string{"b", "l"}},
		{name: "half a swap: retain and discard, no login needed",
			accts:   accts(map[string]account{"a": {exists: true, dual: true, swapping: true}, "b": dual, "c": dual, "l": single}),
			pending: map[string]error{"B": nil, "C": nil}, retain: []string{"a"}, discard: []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planRetire("db-1", users, tc.accts, tc.pending, tc.cur)
			switch {
			case tc.refusal != nil:
				var rf *engine.Refusal
				if !errors.As(err, &rf) || rf.Reason != string(reason.PendingRejected) {
					t.Fatalf("err = %v, want a PendingRejected refusal", err)
				}
				want := "db-1 refuses the new password the source Secret holds for " + strings.Join(tc.refusal, ", ") + ","
				if !strings.Contains(rf.Message, want) {
					t.Fatalf("refusal %q does not name exactly %v", rf.Message, tc.refusal)
				}
				for _, n := range tc.notNamed {
					if strings.Contains(rf.Message, n) {
						t.Fatalf("refusal %q names %s, which accepted its password", rf.Message, n)
					}
				}
				if p.create != nil || p.retain != nil || p.discard != nil {
					t.Fatalf("plan %+v alongside a refusal", p)
				}
				return
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			for _, f := range []struct {
				what      string
				got, want []string
			}{{"create", names(p.create), tc.create}, {"retain", names(p.retain), tc.retain}, {"discard", names(p.discard), tc.discard}} {
				if !reflect.DeepEqual(f.got, f.want) {
					t.Errorf("%s = %v, want %v", f.what, f.got, f.want)
				}
			}
		})
	}
}

// TestLoginsToTry: pending is tried for every existing user that can log in
// from here and is not half swapped; cur only for a user without a
// secondary that refused pending, never for one already discarded.
func TestLoginsToTry(t *testing.T) {
	a, b, c, d := User{Name: "a", Host: "%", Key: "A"}, User{Name: "b", Host: "%", Key: "B"}, User{Name: "c", Host: "%", Key: "C"}, User{Name: "d", Host: "%", Key: "D"}
	local := User{Name: "l", Host: "10.0.0.1", Key: "L"}
	accts := map[string]account{
		accountKey("a", "%"):        {exists: true, dual: true},
		accountKey("b", "%"):        {exists: true},
		accountKey("c", "%"):        {exists: true, dual: true, swapping: true},
		accountKey("l", "10.0.0.1"): {exists: true, dual: true},
	}
	users := []User{a, b, c, d, local}
	secrets := map[string]string{"A": "pa", "B": "pb", "C": "pc", "D": "pd", "L": "pl"}
	got := pendingLogins(users, accts, secrets)
	if len(got) != 2 || got[0].u.Name != "a" || got[0].password != "pa" || got[1].u.Name != "b" || got[1].password != "pb" {
		t.Fatalf("pending logins = %v, want a and b", got)
	}
	refused := &loginRefused{}
	for _, tc := range []struct {
		pending map[string]error
		want    []string
	}{
		{map[string]error{"A": nil, "B": nil}, nil},
		{map[string]error{"A": refused, "B": nil}, nil}, // dual: cur says nothing more
		{map[string]error{"A": nil, "B": refused}, []string{"b"}},
		{map[string]error{"A": nil, "B": errors.New("down")}, nil},
	} {
		var names []string
		for _, l := range curLogins(users, accts, tc.pending, secrets) {
			names = append(names, l.u.Name)
		}
		if !reflect.DeepEqual(names, tc.want) {
			t.Errorf("cur logins after %v = %v, want %v", tc.pending, names, tc.want)
		}
	}
}

// TestVerifyVerdict: every refused account is named; an error that says
// nothing about the passwords is returned only when none was refused.
func TestVerifyVerdict(t *testing.T) {
	down := errors.New("db-2 is unreachable")
	if err := verifyVerdict(nil, nil); err != nil {
		t.Fatalf("nothing refused, nothing failed: %v", err)
	}
	if err := verifyVerdict(nil, down); !errors.Is(err, down) {
		t.Fatalf("unreachable only: %v, want it as it is", err)
	}
	err := verifyVerdict([]string{"a@% on db-0", "c@% on db-1"}, down)
	var rf *engine.Refusal
	if !errors.As(err, &rf) || rf.Reason != string(reason.PendingRejected) ||
		!strings.Contains(rf.Message, "for a@% on db-0, c@% on db-1,") || !strings.Contains(rf.Message, "kubectl rekey recover") {
		t.Fatalf("two refused: %v, want a PendingRejected refusal naming both and the next step", err)
	}
}
