package plugin

import (
	"bytes"
	"strings"
	"testing"
)

// A release build stamps the version and the commit with -ldflags -X
// (hack/release): kubectl rekey version prints both rather than what the
// build info holds.
func TestVersionPrintsReleaseStamp(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"
	var out bytes.Buffer
	cmd := newVersionCommand(Options{Out: &out})
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(out.String(), "\n", 3)
	if len(first) < 2 || first[0] != "kubectl-rekey v1.2.3" || first[1] != "commit: "+commit {
		t.Errorf("kubectl rekey version printed:\n%s", out.String())
	}
}
