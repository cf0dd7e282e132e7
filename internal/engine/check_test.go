package engine

import (
	"strings"
	"testing"
)

func TestPreflightMessage(t *testing.T) {
	f := func(target string) Finding {
		return Finding{Target: target, Check: "privileges", Message: "lacks CREATE USER", Fix: "GRANT CREATE USER ON *.* TO 'a'@'%'"}
	}
	long := f("db-0")
	long.Message = strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name     string
		failed   []Finding
		want     []string
		not      []string
		maxBytes int
	}{
		{"one", []Finding{f("db-0")}, []string{"rotation r1 did not start: 1 check failed: db-0 privileges: lacks CREATE USER (fix: GRANT CREATE USER ON *.* TO 'a'@'%')", "kubectl rekey check app lists them all", "starts once every check passes"}, []string{"more"}, 0},
		{"three named, the rest counted", []Finding{f("db-0"), f("db-1"), f("db-2"), f("db-3"), f("db-4")}, []string{"5 checks failed (and 2 more)", "db-0", "db-1", "db-2", "kubectl rekey check app"}, []string{"db-3", "db-4"}, 0},
		{"a long message is cut", []Finding{long}, []string{"db-0 privileges: xxx", "…", "kubectl rekey check app"}, nil, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PreflightMessage("r1", "app", tc.failed)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("%q holds %q", got, n)
				}
			}
			if tc.maxBytes > 0 && len(got) > tc.maxBytes {
				t.Errorf("%d bytes, want at most %d", len(got), tc.maxBytes)
			}
		})
	}
}

func TestBlockingAndSort(t *testing.T) {
	fs := []Finding{{Target: "a", OK: true}, {Target: "b", Deferred: true}, {Target: "c"}, {Target: "d", OK: true}}
	if b := Blocking(fs); len(b) != 1 || b[0].Target != "c" {
		t.Fatalf("Blocking = %+v, want only c (b clears by itself)", b)
	}
	if f := Failed(fs); len(f) != 2 {
		t.Fatalf("Failed = %+v, want b and c", f)
	}
	SortFindings(fs)
	var order []string
	for _, f := range fs {
		order = append(order, f.Target)
	}
	if got := strings.Join(order, ""); got != "bcad" {
		t.Fatalf("sorted %s, want failed first in their order: bcad", got)
	}
}
