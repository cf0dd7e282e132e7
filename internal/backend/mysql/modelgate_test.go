package mysql

import (
	"strings"
	"testing"
)

// DecideHealth, the health gate a model of a cluster asks, through each
// step of a switchover from db-0 to db-1 (MOCO's: the primary made
// super_read_only, then the candidate promoted and the others re-pointed,
// in either order): only the settled roles let a phase start.
func TestModelGate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []Member
		want    string // "": healthy; else part of the refusal
	}{
		{"before: db-0 primary", []Member{{Name: "db-0"}, {Name: "db-1", ReadOnly: true, Source: "db-0"}}, ""},
		{"the primary made super_read_only", []Member{{Name: "db-0", ReadOnly: true}, {Name: "db-1", ReadOnly: true, Source: "db-0"}}, "as during a switchover"},
		{"db-1 promoted first", []Member{{Name: "db-0", ReadOnly: true}, {Name: "db-1", Source: "db-0", Stopped: true}}, "db-0 is not a replica of the primary db-1"},
		{"db-0 re-pointed first", []Member{{Name: "db-0", ReadOnly: true, Source: "db-1"}, {Name: "db-1", ReadOnly: true, Source: "db-0"}}, "no instance is the primary"},
		{"after: db-1 primary with its reset channel", []Member{{Name: "db-0", ReadOnly: true, Source: "db-1"}, {Name: "db-1", Source: "db-0", Stopped: true}}, ""},
		{"a second switchover begins: the primary's reset channel counts once it is read-only", []Member{{Name: "db-0", ReadOnly: true, Source: "db-1"}, {Name: "db-1", ReadOnly: true, Source: "db-0", Stopped: true}}, "on db-1, replication from db-0:3306: IO thread is stopped"},
		{"a read-only replica with a stopped channel", []Member{{Name: "db-0"}, {Name: "db-1", ReadOnly: true, Source: "db-0", Stopped: true}}, "IO thread is stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rf := DecideHealth(true, tc.members)
			switch {
			case tc.want == "" && rf != nil:
				t.Fatalf("refused: %s", rf.Message)
			case tc.want != "" && rf == nil:
				t.Fatal("let through")
			case tc.want != "" && !strings.Contains(rf.Message, tc.want):
				t.Fatalf("refusal does not say %q: %s", tc.want, rf.Message)
			case tc.want != "" && !strings.Contains(rf.Message, "the discard"):
				t.Fatalf("refusal does not name the discard: %s", rf.Message)
			}
		})
	}
}
