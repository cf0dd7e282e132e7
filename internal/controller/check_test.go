package controller

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"rekey.io/rekey/internal/engine"
)

func TestCheckResult(t *testing.T) {
	many := make([]engine.Finding, 100)
	for i := range many {
		many[i] = engine.Finding{Target: fmt.Sprintf("db-%d", i), Check: "user", OK: i != 70, Message: "ok"}
	}
	long := engine.Finding{Target: strings.Repeat("t", 300), Check: strings.Repeat("c", 200), Message: strings.Repeat("é", 800), Fix: strings.Repeat("f", 2000)}
	for _, tc := range []struct {
		name     string
		fs       []engine.Finding
		passed   bool
		first    string
		n        int
		omitted  int32
		maxBytes int
	}{
		{"none", nil, true, "", 0, 0, 0},
		{"failed first, within 64", many, false, "db-70", 64, 36, 0},
		{"texts within their bounds", []engine.Finding{long}, false, long.Target[:maxFindingTarget-3], 1, 0, maxFindingText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := checkResult("id-1", metav1.Now(), tc.fs)
			if r.ID != "id-1" || r.Passed != tc.passed || len(r.Findings) != tc.n || r.Omitted != tc.omitted {
				t.Fatalf("got id %s passed %v, %d findings, %d omitted; want passed %v, %d, %d", r.ID, r.Passed, len(r.Findings), r.Omitted, tc.passed, tc.n, tc.omitted)
			}
			if tc.n == 0 {
				return
			}
			f := r.Findings[0]
			if !strings.HasPrefix(f.Target, tc.first) {
				t.Fatalf("first finding %q, want %q", f.Target, tc.first)
			}
			for _, s := range []struct {
				v string
				n int
			}{{f.Target, maxFindingTarget}, {f.Check, maxFindingCheck}, {f.Message, maxFindingText}, {f.Fix, maxFindingText}} {
				if len(s.v) > s.n || !utf8.ValidString(s.v) {
					t.Fatalf("%d bytes (valid UTF-8: %v), want at most %d", len(s.v), utf8.ValidString(s.v), s.n)
				}
			}
		})
	}
	if got := checkResult(strings.Repeat("x", 300), metav1.Now(), nil).ID; len(got) > maxCheckID {
		t.Fatalf("id of %d bytes", len(got))
	}
}
