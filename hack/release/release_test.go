package main

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"./usr/bin/python3":              "usr/bin/python3",
		"./lib/x86_64-linux-gnu/libc.so": "usr/lib/x86_64-linux-gnu/libc.so",
		"./lib64/ld-linux-x86-64.so.2":   "usr/lib64/ld-linux-x86-64.so.2",
		"./bin":                          "usr/bin",
		"./":                             "",
		"./library/x":                    "library/x",
	} {
		if got := canonical(in); got != want {
			t.Errorf("canonical(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClosure(t *testing.T) {
	index := indexMap([]map[string]string{
		{"Package": "a", "Depends": "b (>= 1), c | d, python3:any"},
		{"Package": "b", "Pre-Depends": "libc"},
		{"Package": "d"},
		{"Package": "libc"},
		{"Package": "python3.14", "Provides": "python3"},
		{"Package": "excluded", "Provides": "c"},
	})
	got, err := closure(index, []string{"a"}, []string{"excluded"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "a b libc python3.14"; strings.Join(got, " ") != want {
		t.Errorf("closure = %v, want %s (c is provided by an excluded package; d is not taken)", got, want)
	}
	if _, err := closure(index, []string{"missing"}, nil); err == nil {
		t.Error("a seed the index lacks is not refused")
	}
}

func TestChartValues(t *testing.T) {
	dir := t.TempDir()
	chart := filepath.Join(dir, "rekey")
	must(t, os.MkdirAll(chart, 0o755))
	must(t, os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: rekey\nversion: 0.1.0\nappVersion: v0.1.0\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(chart, "values.yaml"), []byte(
		"image:\n  repository: ghcr.io/x/rekey\n  # a comment\n\n  digest: \"\"\n  tag: \"\"\nother:\n  digest: keep\n"), 0o644))
	c := config{version: "v0.2.0", repo: "example.com/rekey", epoch: time.Unix(1, 0)}
	digest := "sha256:" + strings.Repeat("ab", 32)
	file, err := packageChart(c, chart, dir, digest)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(file) != "rekey-0.2.0.tgz" {
		t.Errorf("packaged as %s", file)
	}
	var values, meta string
	readTgz(t, file, map[string]*string{"rekey/values.yaml": &values, "rekey/Chart.yaml": &meta})
	for _, want := range []string{"  repository: example.com/rekey\n", "  digest: \"" + digest + "\"", "other:\n  digest: keep\n"} {
		if !strings.Contains(values, want) {
			t.Errorf("values.yaml lacks %q:\n%s", want, values)
		}
	}
	if !strings.Contains(meta, "version: 0.2.0\n") || !strings.Contains(meta, "appVersion: v0.2.0\n") {
		t.Errorf("Chart.yaml:\n%s", meta)
	}
}

func TestFillKrew(t *testing.T) {
	manifest := []byte(`# header
# more
apiVersion: krew.googlecontainertools.github.com/v1alpha2
spec:
  version: v0.0.0 # PLACEHOLDER: the release tag
  platforms:
    - selector:
        matchLabels: {os: linux, arch: arm64}
      uri: https://example.com/v0.0.0/kubectl-rekey_linux_arm64.tar.gz # PLACEHOLDER
      sha256: "0000" # PLACEHOLDER
      bin: kubectl-rekey
`)
	ps, err := krewPlatforms(manifest)
	if err != nil || len(ps) != 1 || ps[0] != (krewPlatform{"linux", "arm64", "kubectl-rekey_linux_arm64.tar.gz", "kubectl-rekey"}) {
		t.Fatalf("krewPlatforms = %+v, %v", ps, err)
	}
	c := config{version: "v0.2.0", home: "https://github.com/o/r"}
	out, err := fillKrew(c, manifest, map[string]string{"kubectl-rekey_linux_arm64.tar.gz": "beef"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  version: v0.2.0\n", "uri: https://github.com/o/r/releases/download/v0.2.0/kubectl-rekey_linux_arm64.tar.gz\n",
		"sha256: \"beef\"\n", "apiVersion: krew.googlecontainertools.github.com/v1alpha2\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("filled manifest lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "PLACEHOLDER") || strings.Contains(string(out), "# header") {
		t.Errorf("filled manifest keeps the template's comments:\n%s", out)
	}
	if _, err := fillKrew(c, manifest, nil); err == nil {
		t.Error("a manifest naming an archive not built is not refused")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestAddDebOnlyFiles(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range []string{"./usr/bin/ceph", "./usr/bin/rbd", "./lib/x/libc.so", "./usr/share/doc/ceph/copyright"} {
		must(t, tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o4755, Size: 1}))
		_, err := tw.Write([]byte("x"))
		must(t, err)
	}
	must(t, tw.Close())
	only := layerFiles{}
	must(t, only.addDeb(debPkg{Name: "ceph-common", Files: []string{"/usr/bin/ceph"}}, buf.Bytes()))
	must(t, only.finish())
	if got := strings.Join(keys(only), " "); got != "bin usr usr/bin usr/bin/ceph" || only["usr/bin/ceph"].hdr.Mode != 0o755 {
		t.Errorf("files=/usr/bin/ceph gave %s (want usr/bin/ceph without setuid, its parents and the bin link)", got)
	}
	all := layerFiles{}
	must(t, all.addDeb(debPkg{Name: "libc6"}, buf.Bytes()))
	must(t, all.finish())
	if _, ok := all["usr/lib/x/libc.so"]; !ok || all["lib"].hdr.Linkname != "usr/lib" || all["usr/share/doc/ceph/copyright"] != nil {
		t.Errorf("a whole package gave %v (want /lib moved to /usr/lib with a lib link, no docs)", keys(all))
	}
	if err := (layerFiles{}).addDeb(debPkg{Name: "ceph-common", Files: []string{"/usr/bin/nope"}}, buf.Bytes()); err == nil {
		t.Error("a pinned file the package lacks is not refused")
	}
}

func keys(lf layerFiles) []string {
	var r []string
	for k := range lf {
		r = append(r, k)
	}
	sort.Strings(r)
	return r
}
