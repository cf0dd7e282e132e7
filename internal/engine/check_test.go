package engine

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
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

func TestConsumerPatchMessage(t *testing.T) {
	for _, tc := range []struct {
		kind    v1.ConsumerKind
		allowed bool
		want    []string
		not     []string
	}{
		{v1.KindDeployment, true, []string{"rekey may restart it"}, []string{"job template"}},
		{v1.KindStatefulSet, false, []string{"may not patch it", "cannot restart it"}, []string{"job template"}},
		{v1.KindCronJob, true, []string{"may mark its job template", "nothing restarts a CronJob", "every Job it controls carries the mark or has finished"}, []string{"may restart it"}},
		{v1.KindCronJob, false, []string{"may not patch it", "cannot mark its job template"}, []string{"restart it"}},
	} {
		got := ConsumerPatchMessage(tc.kind, tc.allowed)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s allowed=%v: %q lacks %q", tc.kind, tc.allowed, got, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%s allowed=%v: %q holds %q", tc.kind, tc.allowed, got, n)
			}
		}
	}
}
