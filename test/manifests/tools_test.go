package manifests

// The pinned kustomize and helm, run as a user runs them, and the YAML
// they print decoded into objects.

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"rekey.io/rekey/internal/testenv"
)

// pinnedTool returns a pinned tool's path after checking the binary was
// built from the module version versions.env pins. A missing tool fails the
// test (testenv names `make env`); it never skips.
func pinnedTool(t *testing.T, env *testenv.Env, name, module, versionKey string) string {
	t.Helper()
	path, err := env.Tool(name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v: run `make env`", path, err)
	}
	got := ""
	if info.Main.Path == module {
		got = info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == module {
			got = d.Version
		}
	}
	if want := env.Versions[versionKey]; got != want {
		t.Fatalf("%s is built from %s %q, versions.env pins %s: run `make env`", path, module, got, want)
	}
	return path
}

// runTool runs a tool in the repository root with an empty HOME and Helm
// directories of its own, and returns its stdout.
func runTool(t *testing.T, env *testenv.Env, tool string, args ...string) []byte {
	t.Helper()
	start := time.Now()
	stdout, stderr, err := tryTool(t, env, tool, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(tool), strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("%s %s: %d bytes in %s", filepath.Base(tool), strings.Join(args, " "), stdout.Len(), time.Since(start).Round(time.Millisecond))
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Errorf("%s %s wrote to stderr:\n%s", filepath.Base(tool), strings.Join(args, " "), s)
	}
	return stdout.Bytes()
}

// tryTool runs a tool as runTool does, and returns its outputs and error
// for the caller to judge.
func tryTool(t *testing.T, env *testenv.Env, tool string, args ...string) (stdout, stderr *bytes.Buffer, err error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(tool, args...)
	cmd.Dir = env.RepoRoot
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data")}
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return stdout, stderr, cmd.Run()
}

// unstructuredObjects decodes a multi-document YAML stream, skipping empty
// documents (Helm leaves some).
func unstructuredObjects(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, doc)
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, doc)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no objects", what)
	}
	return out
}

func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", u.GetKind(), ns, u.GetName())
	}
	return u.GetKind() + " " + u.GetName()
}
