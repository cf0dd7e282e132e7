package mysql

import (
	"strings"
	"testing"

	"rekey.io/rekey/internal/reason"
)

func TestVersionRefusal(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		refuse bool
		says   string // in the message when refused
	}{
		{"9.7.4", false, ""},
		{"9.7.4-log", false, ""},
		{"8.4.3", false, ""},
		{"8.0.21", false, ""},
		{"8.0.36-28", false, ""}, // Percona Server's suffix
		{"8.0.22-debug", false, ""},
		{"10.0.0", false, ""}, // a future MySQL major
		{"8.0.20", true, "runs MySQL 8.0.20"},
		{"8.0.14-log", true, "runs MySQL 8.0.14"},
		{"5.7.44", true, "runs MySQL 5.7.44"},
		{"10.11.6-MariaDB-0+deb12u1", true, "MariaDB"},
		{"11.4.2-MariaDB", true, "MariaDB"},
		{"", true, "cannot read"},
		{"garbage", true, "cannot read"},
		{"8", true, "cannot read"},
		{"8.0.x", true, "cannot read"},
		{"8.0 CANARY <html>", true, "(not a version string)"},
	} {
		rf := versionRefusal("db-1", tc.raw)
		if (rf != nil) != tc.refuse {
			t.Errorf("%q: refused=%v, want %v (%v)", tc.raw, rf != nil, tc.refuse, rf)
			continue
		}
		if rf == nil {
			continue
		}
		if rf.Reason != string(reason.UnsupportedVersion) {
			t.Errorf("%q: reason %s", tc.raw, rf.Reason)
		}
		for _, want := range []string{tc.says, "db-1", "8.0.21", "Nothing was changed"} {
			if !strings.Contains(rf.Message, want) {
				t.Errorf("%q: message %q does not say %q", tc.raw, rf.Message, want)
			}
		}
	}
}
