package rabbitmq

import (
	"errors"
	"fmt"
	"testing"

	"rekey.io/rekey/internal/engine"
)

// The broker never echoed a password in any test; should one ever, the
// message loses it and the controller still sees the same kind of error.
func TestRedactKeepsTheKind(t *testing.T) {
	b := &Backend{adminPassword: "AdminPw1"}
	s := engine.Secrets{KeyUsername: "nova-g1", KeyPassword: "CurPw2"}
	for _, err := range []error{
		&engine.Refusal{Reason: "R", Message: "user nova-g1 with CurPw2"},
		fmt.Errorf("wrapped: %w", &engine.UnreachableError{Instance: "http://h", Err: errors.New("AdminPw1 refused")}),
		errors.New("CurPw2 and AdminPw1"),
	} {
		got := b.redact(err, s)
		noSecret(t, got, "AdminPw1", "CurPw2")
		if _, ok := engine.AsRefusal(err); ok {
			if r, ok := engine.AsRefusal(got); !ok || r.Reason != "R" || r.Message != "user nova-g1 with [redacted]" {
				t.Errorf("refusal became %#v", got)
			}
		}
		if _, ok := engine.AsUnreachable(err); ok {
			if u, ok := engine.AsUnreachable(got); !ok || u.Instance != "http://h" {
				t.Errorf("unreachable became %#v", got)
			}
		}
	}
	clean := errors.New("nothing secret")
	if b.redact(clean, s) != clean {
		t.Error("a clean error was replaced")
	}
}
