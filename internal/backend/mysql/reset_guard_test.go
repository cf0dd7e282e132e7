package mysql

import (
	"context"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
)

// TestResetNeedsEveryCurrentPassword: a reset with a password missing
// (a source Secret already emptied) is refused before any instance is
// contacted, instead of setting a password nobody holds.
func TestResetNeedsEveryCurrentPassword(t *testing.T) {
	b := &Backend{
		Users:     []User{{Name: "app", Host: "%", Key: "APP_PASSWORD"}, {Name: "ro", Host: "%", Key: "RO_PASSWORD"}},
		Instances: []Instance{{Name: "db-0", Addr: "127.0.0.1:1"}},
	}
	for _, cur := range []engine.Secrets{{}, {"APP_PASSWORD": "a-password-of-thirty-two-letters"}} {
		err := b.Reset(context.Background(), cur)
		if err == nil || !strings.Contains(err.Error(), "nothing to reset to") {
			t.Fatalf("Reset with %d of 2 passwords: %v, want a refusal naming the missing password", len(cur), err)
		}
	}
}
