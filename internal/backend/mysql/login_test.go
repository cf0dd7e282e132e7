package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestEveryRefusedUserNamedOnRealMySQL: the logins of an instance run
// together, and every user whose password MySQL refuses is named — not
// only the first. Two of four users' passwords are edited by hand in the
// source Secret: Verify names both on every instance, Retire names both and
// discards nothing anywhere, Provision names both with their keys; none
// names a user that logs in, none holds a password.
func TestEveryRefusedUserNamedOnRealMySQL(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	createRTAdmin(t, c)
	b, cur, pending := rtBackend(t, c, "ru-", 4)
	if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
		t.Fatal(err)
	}
	edited := engine.Secrets{}
	for k, v := range pending {
		edited[k] = v
	}
	bad, good := []string{"ru-1", "ru-3"}, []string{"ru-0", "ru-2"}
	for _, u := range bad {
		edited[DefaultKey(u)] = u + "-edited-by-hand-0123456789abcdef"
	}
	// refusal checks that err is a refusal for reason naming every bad
	// user as want says, no good user, and no password.
	refusal := func(what string, err error, r reason.Reason, want func(user string) []string) {
		t.Helper()
		var rf *engine.Refusal
		if !errors.As(err, &rf) || rf.Reason != string(r) {
			t.Fatalf("%s: %v, want a %s refusal", what, err, r)
		}
		t.Logf("%s: %s", what, rf.Message)
		for _, u := range bad {
			for _, w := range want(u) {
				if !strings.Contains(rf.Message, w) {
					t.Errorf("%s: the refusal does not name %q", what, w)
				}
			}
		}
		for _, u := range good {
			if strings.Contains(rf.Message, u+"@") {
				t.Errorf("%s: the refusal names %s, whose password logs in", what, u)
			}
		}
		for _, s := range []engine.Secrets{cur, pending, edited} {
			for _, pw := range s {
				if strings.Contains(rf.Message, pw) {
					t.Fatalf("%s: the refusal holds a password", what)
				}
			}
		}
	}
	refusal("Verify", b.Verify(ctx, edited), reason.PendingRejected, func(u string) []string {
		var out []string
		for _, i := range c.Instances() {
			out = append(out, u+"@% on "+i.Name)
		}
		return out
	})
	if err := b.Verify(ctx, pending); err != nil {
		t.Fatalf("Verify of the passwords MySQL holds: %v", err)
	}
	refusal("Retire", b.Retire(ctx, cur, edited), reason.PendingRejected, func(u string) []string { return []string{u + "@%"} })
	for _, i := range c.Instances() {
		for k := range 4 {
			name := fmt.Sprintf("ru-%d", k)
			for _, pw := range []string{cur[DefaultKey(name)], pending[DefaultKey(name)]} {
				if err := i.CanLogin(name, pw); err != nil {
					t.Fatalf("after the refused Retire, %s on %s: %v (something was discarded)", name, i.Name, err)
				}
			}
		}
	}
	if err := b.Retire(ctx, cur, pending); err != nil {
		t.Fatal(err)
	}
	for _, i := range c.Instances() {
		for k := range 4 {
			name := fmt.Sprintf("ru-%d", k)
			if i.CanLogin(name, cur[DefaultKey(name)]) == nil || i.CanLogin(name, pending[DefaultKey(name)]) != nil {
				t.Fatalf("after Retire, %s on %s does not accept exactly the new password", name, i.Name)
			}
		}
	}
	refusal("Provision", func() error { _, err := b.Provision(ctx, edited); return err }(), reason.ProvisionFailed, func(u string) []string {
		return []string{fmt.Sprintf("user %s@%% (key %s)", u, DefaultKey(u))}
	})
	assertNoBinlogDDL(t, c)
}
