package demo

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/testenv"
)

// TestDemo runs `make demo`'s job, so that the README's first command
// keeps working: it must end with zero failed logins and its summary.
func TestDemo(t *testing.T) {
	env := testenv.Require(t)
	plugin := filepath.Join(t.TempDir(), "kubectl-rekey")
	build := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-rekey")
	build.Dir = env.RepoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-rekey: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, &out, plugin)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Idle-before", "Rotating", "Distributed", "Idle-after", "final generation: 2", "no login failed"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("demo output lacks %q", want)
		}
	}
}
