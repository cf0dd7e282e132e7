package engine

import (
	"slices"
	"testing"
)

func TestAck(t *testing.T) {
	v := MergeAck("", "h1", []string{"b", "a"})
	if v != "h1:a,b" {
		t.Fatalf("first batch = %q", v)
	}
	v = MergeAck(v, "h1", []string{"c", "a"})
	if v != "h1:a,b,c" {
		t.Fatalf("second batch for the same hash must accumulate: %q", v)
	}
	v = MergeAck(v, "h2", []string{"z"})
	if v != "h2:z" {
		t.Fatalf("a new hash must start over: %q", v)
	}
	for _, bad := range []string{"", "nohash", ":a,b"} {
		if _, _, ok := ParseAck(bad); ok {
			t.Errorf("ParseAck(%q) accepted a value without a hash", bad)
		}
	}
	h, m, ok := ParseAck("h: a, ,b,a")
	if !ok || h != "h" || !slices.Equal(m, []string{"a", "b"}) {
		t.Fatalf("ParseAck = %q %v %v", h, m, ok)
	}
}

func FuzzParseAck(f *testing.F) {
	f.Add("h1:a,b")
	f.Add(":")
	f.Fuzz(func(t *testing.T, v string) {
		h, m, ok := ParseAck(v)
		if !ok {
			return
		}
		if h == "" {
			t.Fatal("accepted an empty hash")
		}
		again, m2, ok2 := ParseAck(MergeAck("", h, m))
		if !ok2 || again != h || len(m2) != len(m) {
			t.Fatalf("round trip of %q: %q %v", v, again, m2)
		}
	})
}

// TestJudgeAck: an ack for an earlier distribution of the set is stale,
// not a mistake (no Warning); a malformed one or one for a hash the set
// never distributed is.
func TestJudgeAck(t *testing.T) {
	earlier := []string{"h1", "h0"}
	for _, c := range []struct {
		name, v string
		want    AckVerdict
	}{
		{"current distribution", "h2:a,b", AckCounts},
		{"the last valid ack, left from the previous rotation", "h1:a,b", AckSuperseded},
		{"an older distribution", "h0:a", AckSuperseded},
		{"a hash never distributed", "0123456789ab:a", AckUnknownHash},
		{"malformed: no hash", ":a,b", AckMalformed},
		{"malformed: no separator", "h2", AckMalformed},
		{"malformed: empty", "", AckMalformed},
	} {
		if got, _, _ := JudgeAck(c.v, "h2", earlier); got != c.want {
			t.Errorf("%s: JudgeAck(%q) = %d, want %d", c.name, c.v, got, c.want)
		}
	}
	if got, _, _ := JudgeAck("h1:a", "h2", nil); got != AckUnknownHash {
		t.Errorf("without known earlier hashes, another hash is unknown: %d", got)
	}
}
