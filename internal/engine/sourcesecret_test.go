package engine

import (
	"slices"
	"strings"
	"testing"
)

func TestInspectPending(t *testing.T) {
	keys := []string{"A", "B"}
	cases := []struct {
		name string
		data map[string][]byte
		want PendingState
	}{
		{"none", map[string][]byte{"A": []byte("a")}, PendingNone},
		{"match", map[string][]byte{"A_PENDING": []byte("x"), "B_PENDING": []byte("y"), "ROTATION_ID": []byte("r1")}, PendingMatch},
		{"stale id", map[string][]byte{"A_PENDING": []byte("x"), "B_PENDING": []byte("y"), "ROTATION_ID": []byte("r0")}, PendingStale},
		{"missing key", map[string][]byte{"A_PENDING": []byte("x"), "ROTATION_ID": []byte("r1")}, PendingPartial},
		{"empty key", map[string][]byte{"A_PENDING": []byte("x"), "B_PENDING": {}, "ROTATION_ID": []byte("r1")}, PendingPartial},
		{"keys without id", map[string][]byte{"A_PENDING": []byte("x"), "B_PENDING": []byte("y")}, PendingPartial},
		{"id without keys", map[string][]byte{"ROTATION_ID": []byte("r1")}, PendingPartial},
	}
	for _, c := range cases {
		if got := InspectPending(c.data, keys, "r1"); got != c.want {
			t.Errorf("%s: InspectPending = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestConfirmIsIdempotent(t *testing.T) {
	keys := []string{"A", "B"}
	data := WithPending(map[string][]byte{"A": []byte("a0"), "B": []byte("b0"), "OTHER": []byte("o")},
		Secrets{"A": "a1", "B": "b1"}, "r1")
	once := Confirm(data, keys)
	twice := Confirm(once, keys)
	for _, d := range []map[string][]byte{once, twice} {
		if string(d["A"]) != "a1" || string(d["B"]) != "b1" || string(d["OTHER"]) != "o" {
			t.Fatalf("confirm lost or mixed secrets: %v", keysOf(d))
		}
		if _, ok := d["ROTATION_ID"]; ok || InspectPending(d, keys, "r1") != PendingNone {
			t.Fatalf("confirm left rotation keys: %v", keysOf(d))
		}
	}
	if string(data["A"]) != "a0" {
		t.Fatal("Confirm modified its input")
	}
}

func TestNewPassword(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		p, err := NewPassword()
		if err != nil {
			t.Fatal(err)
		}
		if len(p) < 32 {
			t.Fatalf("password of %d characters, want >= 32", len(p))
		}
		if strings.Trim(p, PasswordAlphabet) != "" {
			t.Fatalf("password has characters outside letters and digits")
		}
		if seen[p] {
			t.Fatal("repeated password")
		}
		seen[p] = true
	}
}

func keysOf(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestSplitByPending(t *testing.T) {
	has, lacks := SplitByPending([]string{"ADMIN", "APP", "APP2"}, Secrets{"APP": "p", "APP2": ""})
	if !slices.Equal(has, []string{"APP"}) || !slices.Equal(lacks, []string{"ADMIN", "APP2"}) {
		t.Fatalf("SplitByPending = %v, %v", has, lacks)
	}
}
