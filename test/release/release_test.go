//go:build release

// Package release checks what make release built (hack/release, into
// bin/release): the multi-architecture image index, each image's platform,
// binaries and SBOM, the packaged chart's default image, the krew
// manifest's sums, and that a second build gave the same bytes.
//
// It reads a finished build rather than building one (a cold build
// cross-compiles the manager and the plugin for six platforms), so it is
// not part of make test: make release-check builds the release a second
// time and runs it (go test -tags release ./test/release/). Without a
// build to read it fails; it never skips.
package release

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// summary is the part of release.json the checks start from.
type summary struct {
	Version    string `json:"version"`
	Revision   string `json:"revision"`
	Repository string `json:"repository"`
	Index      string `json:"index"`
	Images     map[string]struct {
		Manifest string `json:"manifest"`
		SBOM     string `json:"sbom"`
		Packages int    `json:"debianPackages"`
	} `json:"images"`
	Chart    string            `json:"chart"`
	Krew     string            `json:"krew"`
	Archives map[string]string `json:"archives"`
}

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// releaseDir is the build to check: REKEY_RELEASE_DIR, else bin/release.
func releaseDir(t *testing.T) string {
	if d := os.Getenv("REKEY_RELEASE_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot(t), "bin/release")
}

func readSummary(t *testing.T, out string) summary {
	t.Helper()
	var s summary
	data, err := os.ReadFile(filepath.Join(out, "release.json"))
	if err != nil {
		t.Fatalf("no release to check in %s (run make release first): %v", out, err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("release.json: %v", err)
	}
	return s
}

func TestRelease(t *testing.T) {
	out := releaseDir(t)
	s := readSummary(t, out)
	if len(s.Images) != 2 {
		t.Fatalf("release.json names images for %d architectures, want amd64 and arm64", len(s.Images))
	}
	t.Logf("release %s of commit %s in %s: image index %s", s.Version, s.Revision, out, s.Index)

	managers := map[string][]byte{}
	t.Run("index", func(t *testing.T) { checkIndex(t, out, s, managers) })
	t.Run("sbom", func(t *testing.T) { checkSBOMs(t, out, s, managers) })
	t.Run("chart", func(t *testing.T) { checkChart(t, out, s) })
	t.Run("krew", func(t *testing.T) { checkKrew(t, out, s) })
	t.Run("plugin-version", func(t *testing.T) { checkPluginVersion(t, out, s) })
	t.Run("sums", func(t *testing.T) { checkSums(t, out) })
}

// TestReproducible: a second build of the same commit
// (REKEY_RELEASE_AGAIN, which make release-check writes) gave the same
// bytes: every file of the release and every blob of the OCI layout.
func TestReproducible(t *testing.T) {
	again := os.Getenv("REKEY_RELEASE_AGAIN")
	if again == "" {
		t.Fatal("REKEY_RELEASE_AGAIN names no second build to compare with (make release-check builds one)")
	}
	out := releaseDir(t)
	first, second := readSummary(t, out), readSummary(t, again)
	if first.Revision == "" || first.Revision != second.Revision {
		t.Fatalf("%s is a build of commit %q, %s of %q: build both from the same commit", out, first.Revision, again, second.Revision)
	}
	a, b := treeSums(t, out), treeSums(t, again)
	for name, sum := range a {
		if b[name] != sum {
			t.Errorf("%s differs between two builds: %s then %s", name, sum, b[name])
		}
	}
	if len(a) != len(b) {
		t.Errorf("the first build wrote %d files, the second %d", len(a), len(b))
	}
	t.Logf("%d files (sha256 and size) identical in both builds of %s; image index %s", len(a), first.Revision, first.Index)
}

// checkPluginVersion: the linux/amd64 plugin of the release (this
// machine's platform) says the release's version and commit.
func checkPluginVersion(t *testing.T, out string, s summary) {
	bin := filepath.Join(t.TempDir(), "kubectl-rekey")
	if err := os.WriteFile(bin, archived(t, filepath.Join(out, "kubectl-rekey_linux_amd64.tar.gz"), "kubectl-rekey"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl-rekey version: %v\n%s", err, got)
	}
	want := "kubectl-rekey " + s.Version + "\ncommit: " + s.Revision + "\n"
	if s.Revision == "" || !bytes.HasPrefix(got, []byte(want)) {
		t.Errorf("kubectl-rekey version printed:\n%s\nwant it to start:\n%s", got, want)
	}
}

// checkSums: SHA256SUMS lists every file at the top of the release with its sum.
func checkSums(t *testing.T, out string) {
	data, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		sum, name, ok := strings.Cut(l, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", l)
		}
		listed[name] = sum
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() || e.Name() == "SHA256SUMS" {
			continue
		}
		n++
		if got := fileSum(t, filepath.Join(out, e.Name())); listed[e.Name()] != got {
			t.Errorf("SHA256SUMS says %q for %s, the file's is %s", listed[e.Name()], e.Name(), got)
		}
	}
	if n != len(listed) {
		t.Errorf("SHA256SUMS lists %d files, the release holds %d", len(listed), n)
	}
}

func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sums[rel] = fileSum(t, p) + " " + strconv.FormatInt(fi.Size(), 10)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}
