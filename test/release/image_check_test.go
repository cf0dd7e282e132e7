//go:build release

package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type manifest struct {
	MediaType string       `json:"mediaType"`
	Manifests []descriptor `json:"manifests"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string   `json:"User"`
		Entrypoint []string `json:"Entrypoint"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// blob reads a blob of the layout and checks it is what its name says.
func blob(t *testing.T, layout string, d descriptor) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", strings.TrimPrefix(d.Digest, "sha256:")))
	if err != nil {
		t.Fatal(err)
	}
	if got := "sha256:" + sha(data); got != d.Digest || int64(len(data)) != d.Size {
		t.Fatalf("blob %s: sha256 %s, %d bytes; the descriptor says %d bytes", d.Digest, got, len(data), d.Size)
	}
	return data
}

func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// checkIndex: the layout names the index by the version, the index names
// linux/amd64 and linux/arm64, and each image is of its platform through
// and through.
func checkIndex(t *testing.T, out string, s summary, managers map[string][]byte) {
	layout := filepath.Join(out, "oci")
	var top manifest
	data, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	decode(t, data, &top)
	if len(top.Manifests) != 1 || top.Manifests[0].Digest != s.Index ||
		top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" ||
		top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != s.Version {
		t.Fatalf("the layout's index.json names %+v, want the image index %s named %s", top.Manifests, s.Index, s.Version)
	}
	var idx manifest
	decode(t, blob(t, layout, top.Manifests[0]), &idx)
	seen := map[string]bool{}
	for _, m := range idx.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			t.Fatalf("index entry %s names no linux platform", m.Digest)
		}
		arch := m.Platform.Architecture
		seen[arch] = true
		if m.Digest != s.Images[arch].Manifest {
			t.Errorf("%s: the index names %s, release.json %s", arch, m.Digest, s.Images[arch].Manifest)
		}
		t.Run(arch, func(t *testing.T) { managers[arch] = checkImage(t, layout, m, arch) })
	}
	if !seen["amd64"] || !seen["arm64"] || len(seen) != 2 {
		t.Errorf("the index names %v, want exactly amd64 and arm64", seen)
	}
}

type fsEntry struct {
	typ  byte
	link string
	data []byte
}

// checkImage returns the image's manager binary.
func checkImage(t *testing.T, layout string, d descriptor, arch string) []byte {
	var m manifest
	decode(t, blob(t, layout, d), &m)
	var cfg imageConfig
	decode(t, blob(t, layout, m.Config), &cfg)
	if cfg.Architecture != arch || cfg.OS != "linux" {
		t.Errorf("config says %s/%s, the index linux/%s", cfg.OS, cfg.Architecture, arch)
	}
	if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/rekey" {
		t.Errorf("config runs %v as %q, want /rekey as 65532:65532", cfg.Config.Entrypoint, cfg.Config.User)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		t.Fatalf("%d diff_ids for %d layers", len(cfg.RootFS.DiffIDs), len(m.Layers))
	}
	files := map[string]*fsEntry{}
	for i, l := range m.Layers {
		gz, err := gzip.NewReader(bytes.NewReader(blob(t, layout, l)))
		if err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		raw, err := io.ReadAll(gz)
		if err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		if got := "sha256:" + sha(raw); got != cfg.RootFS.DiffIDs[i] {
			t.Errorf("layer %d: uncompressed sha256 %s, diff_id %s", i, got, cfg.RootFS.DiffIDs[i])
		}
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			e := &fsEntry{typ: h.Typeflag, link: h.Linkname}
			if h.Typeflag == tar.TypeReg {
				e.data, _ = io.ReadAll(tr)
			}
			files[strings.TrimSuffix(path.Clean(h.Name), "/")] = e
		}
	}
	want := machines[arch]
	mgr := files["rekey"]
	if mgr == nil {
		t.Fatal("no /rekey in the image")
	}
	if f := elfFile(t, "/rekey", mgr.data); f.Machine != want || interp(f) != "" {
		t.Errorf("/rekey is an ELF for %s (interpreter %q), want a static %s binary", f.Machine, interp(f), want)
	}
	// No binary of another architecture anywhere in the image.
	elves := 0
	for name, e := range files {
		if e.typ == tar.TypeReg && bytes.HasPrefix(e.data, []byte("\x7fELF")) {
			elves++
			if f := elfFile(t, name, e.data); f.Machine != want {
				t.Errorf("/%s is an ELF for %s in the %s image", name, f.Machine, arch)
			}
		}
	}
	// The ceph CLI's interpreter and its loader are there, for this machine.
	ceph := resolve(t, files, "usr/bin/ceph")
	if shebang, ok := bytes.CutPrefix(ceph.data, []byte("#!")); !ok || !bytes.HasPrefix(bytes.TrimLeft(shebang, " "), []byte("/usr/bin/python3")) {
		t.Fatalf("/usr/bin/ceph starts %q, want a python3 script", ceph.data[:min(len(ceph.data), 40)])
	}
	py := elfFile(t, "/usr/bin/python3", resolve(t, files, "usr/bin/python3").data)
	loader := interp(py)
	if py.Machine != want || loader == "" {
		t.Fatalf("/usr/bin/python3 is for %s with interpreter %q", py.Machine, loader)
	}
	if f := elfFile(t, loader, resolve(t, files, loader).data); f.Machine != want {
		t.Errorf("python3's loader %s is for %s", loader, f.Machine)
	}
	t.Logf("%s: %d entries, %d ELF files all %s; ceph runs on %s via %s", arch, len(files), elves, want, "/usr/bin/python3", loader)
	return mgr.data
}

func elfFile(t *testing.T, name string, data []byte) *elf.File {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

func interp(f *elf.File) string {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, _ := io.ReadAll(p.Open())
			return strings.TrimRight(string(b), "\x00")
		}
	}
	return ""
}

// resolve follows symlinks, in every component, inside the image's files.
func resolve(t *testing.T, files map[string]*fsEntry, name string) *fsEntry {
	t.Helper()
	p := strings.TrimPrefix(path.Clean("/"+name), "/")
	for hops := 0; hops < 40; hops++ {
		parts := strings.Split(p, "/")
		changed := false
		for i := range parts {
			pre := strings.Join(parts[:i+1], "/")
			e := files[pre]
			if e == nil {
				t.Fatalf("/%s (for /%s) is not in the image", pre, name)
			}
			if e.typ == tar.TypeSymlink {
				target := e.link
				if !strings.HasPrefix(target, "/") {
					target = path.Join(path.Dir("/"+pre), target)
				}
				p = strings.TrimPrefix(path.Clean(path.Join(target, strings.Join(parts[i+1:], "/"))), "/")
				changed = true
				break
			}
		}
		if !changed {
			if e := files[p]; e.typ == tar.TypeReg {
				return e
			}
			t.Fatalf("/%s (for /%s) is not a file", p, name)
		}
	}
	t.Fatalf("/%s: too many symlinks", name)
	return nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func fileSum(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return sha(data)
}
