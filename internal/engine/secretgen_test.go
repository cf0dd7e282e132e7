package engine

import (
	"strings"
	"testing"
)

func TestNewPasswordOfLength(t *testing.T) {
	for _, tc := range []struct {
		n    int
		fail bool
	}{
		{MinPasswordLength - 1, true},
		{MinPasswordLength, false},
		{48, false},
		{MaxPasswordLength, false},
		{MaxPasswordLength + 1, true},
		{0, true},
	} {
		p, err := NewPasswordOfLength(tc.n)
		if (err != nil) != tc.fail {
			t.Fatalf("length %d: err=%v, want failure %v", tc.n, err, tc.fail)
		}
		if tc.fail {
			continue
		}
		if len(p) != tc.n || strings.Trim(p, PasswordAlphabet) != "" {
			t.Fatalf("length %d: got %d characters, or some outside letters and digits", tc.n, len(p))
		}
	}
}

// The floor users are told (in bits) must be what the shortest password
// really carries.
func TestPasswordFloorBits(t *testing.T) {
	if b := PasswordBits(MinPasswordLength); b < MinPasswordBits || b >= MinPasswordBits+1 {
		t.Fatalf("%d characters carry %.1f bits, said to be %d", MinPasswordLength, b, MinPasswordBits)
	}
	if DefaultPasswordLength != 32 {
		t.Fatalf("default length %d: MySQL refuses a replication password over 32 characters", DefaultPasswordLength)
	}
}

func TestNewPasswordsLengthPerKey(t *testing.T) {
	s, err := NewPasswords(map[string]int{"REPL": 32, "APP": 64})
	if err != nil {
		t.Fatal(err)
	}
	if len(s["REPL"]) != 32 || len(s["APP"]) != 64 {
		t.Fatalf("lengths %d and %d, want 32 and 64", len(s["REPL"]), len(s["APP"]))
	}
	if _, err := NewPasswords(map[string]int{"WEAK": 16}); err == nil || !strings.Contains(err.Error(), "WEAK") {
		t.Fatalf("a length below the floor: err=%v, want one naming the key", err)
	}
}
