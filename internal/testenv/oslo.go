package testenv

import (
	"os/exec"
	"strings"
	"testing"
)

// OsloPython is Debian's python3 with Debian's python3-oslo.messaging
// (hack/env/oslo.sh installs it; a python3 earlier on PATH, e.g. pyenv's,
// does not see it). Missing, or off the pinned series, fails the test: it
// never skips.
func OsloPython(t testing.TB) string {
	t.Helper()
	const py = "/usr/bin/python3"
	out, err := exec.Command(py, "-c", `import importlib.metadata as m, oslo_messaging; print(m.version("oslo.messaging"))`).CombinedOutput()
	if err != nil {
		t.Fatalf("oslo.messaging is not importable by %s (run `make env`, which runs hack/env/oslo.sh): %v: %s", py, err, out)
	}
	v := strings.TrimSpace(string(out))
	if want := Require(t).Versions["OSLO_MESSAGING_SERIES"]; want == "" || !strings.HasPrefix(v, want) {
		t.Fatalf("oslo.messaging %s is not the pinned %q* (hack/env/versions.env OSLO_MESSAGING_SERIES)", v, want)
	}
	t.Logf("oslo.messaging %s", v)
	return py
}
