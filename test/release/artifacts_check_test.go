//go:build release

package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/macho"
	"debug/pe"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"rekey.io/rekey/internal/testenv"
)

type spdxDoc struct {
	SPDXVersion string `json:"spdxVersion"`
	DataLicense string `json:"dataLicense"`
	Packages    []struct {
		SPDXID       string `json:"SPDXID"`
		Name         string `json:"name"`
		VersionInfo  string `json:"versionInfo"`
		ExternalRefs []struct {
			Type    string `json:"referenceType"`
			Locator string `json:"referenceLocator"`
		} `json:"externalRefs"`
	} `json:"packages"`
	Relationships []struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	} `json:"relationships"`
}

// checkSBOMs: each image's SBOM describes that image (its manifest digest)
// and lists every Go module the image's manager records in its build
// information, the Go toolchain, and the Debian packages of that
// architecture (or arch all).
func checkSBOMs(t *testing.T, out string, s summary, managers map[string][]byte) {
	for arch, img := range s.Images {
		var doc spdxDoc
		data, err := os.ReadFile(filepath.Join(out, img.SBOM))
		if err != nil {
			t.Fatal(err)
		}
		decode(t, data, &doc)
		if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" {
			t.Errorf("%s: %s %s, want SPDX-2.3 CC0-1.0", img.SBOM, doc.SPDXVersion, doc.DataLicense)
		}
		ids := map[string]string{}
		have := map[string]bool{}
		debs := 0
		for _, p := range doc.Packages {
			ids[p.SPDXID] = p.VersionInfo
			have[p.Name+"@"+p.VersionInfo] = true
			for _, r := range p.ExternalRefs {
				if r.Type == "purl" && strings.HasPrefix(r.Locator, "pkg:deb/debian/") {
					debs++
					if !strings.Contains(r.Locator, "arch="+arch+"&") && !strings.Contains(r.Locator, "arch=all&") {
						t.Errorf("%s: %s is not of %s", img.SBOM, r.Locator, arch)
					}
				}
			}
		}
		described := ""
		for _, r := range doc.Relationships {
			if r.Element == "SPDXRef-DOCUMENT" && r.Type == "DESCRIBES" {
				described = ids[r.Related]
			}
		}
		if described != img.Manifest {
			t.Errorf("%s describes %q, want the image %s", img.SBOM, described, img.Manifest)
		}
		mgr := managers[arch]
		if mgr == nil {
			t.Fatalf("no manager binary read from the %s image", arch)
		}
		bi, err := buildinfo.Read(bytes.NewReader(mgr))
		if err != nil {
			t.Fatalf("the %s image's /rekey: %v", arch, err)
		}
		if !have["stdlib@"+bi.GoVersion] || len(bi.Deps) == 0 {
			t.Errorf("%s: no stdlib@%s or the manager records no module", img.SBOM, bi.GoVersion)
		}
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			if !have[d.Path+"@"+d.Version] {
				t.Errorf("%s lacks the manager's module %s@%s", img.SBOM, d.Path, d.Version)
			}
		}
		if !have["python3-rados@"+debVersion(t, arch, "python3-rados")] || debs != img.Packages+1 {
			t.Errorf("%s: %d Debian packages, want the %d of the closure and ceph-common, python3-rados among them", img.SBOM, debs, img.Packages)
		}
		t.Logf("%s: %d Go modules, %d Debian packages", img.SBOM, len(bi.Deps), debs)
	}
}

// debVersion: the version the lock pins for a package of arch.
func debVersion(t *testing.T, arch, pkg string) string {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "hack/release/debian.lock"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == arch && f[1] == pkg {
			return f[2]
		}
	}
	t.Fatalf("the lock pins no %s for %s", pkg, arch)
	return ""
}

// untar returns the files of a gzipped tar.
func untar(t *testing.T, file string) map[string][]byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if h.Typeflag == tar.TypeReg {
			files[h.Name], _ = io.ReadAll(tr)
		}
	}
}

// checkChart: the packaged chart's values name the built index, and helm,
// rendering the package with no value set, deploys exactly that image.
func checkChart(t *testing.T, out string, s summary) {
	file := filepath.Join(out, s.Chart)
	files := untar(t, file)
	var values struct {
		Image struct{ Repository, Digest string }
	}
	if err := yaml.Unmarshal(files["rekey/values.yaml"], &values); err != nil {
		t.Fatalf("rekey/values.yaml: %v", err)
	}
	if values.Image.Digest != s.Index || values.Image.Repository != s.Repository {
		t.Errorf("the chart's image is %s@%s, want %s@%s", values.Image.Repository, values.Image.Digest, s.Repository, s.Index)
	}
	var meta struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(files["rekey/Chart.yaml"], &meta); err != nil {
		t.Fatal(err)
	}
	if meta.AppVersion != s.Version || "v"+meta.Version != s.Version {
		t.Errorf("Chart.yaml: version %s appVersion %s, want %s", meta.Version, meta.AppVersion, s.Version)
	}
	e, err := testenv.Load()
	if err != nil {
		t.Fatal(err)
	}
	helm, err := e.Tool("helm")
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := exec.Command(helm, "template", "rekey", file, "--namespace", "rekey-system").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", s.Chart, err, rendered)
	}
	ref := s.Repository + "@" + s.Index
	if !bytes.Contains(rendered, []byte("image: "+ref+"\n")) && !bytes.Contains(rendered, []byte(`image: "`+ref+`"`)) {
		t.Errorf("helm template %s renders no image: %s", s.Chart, ref)
	}
}

type krewManifest struct {
	Spec struct {
		Version   string `json:"version"`
		Platforms []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// checkKrew: every archive the krew manifest names is in the release with
// that sha256 and holds the named binary, built for the platform.
func checkKrew(t *testing.T, out string, s summary) {
	var m krewManifest
	data, err := os.ReadFile(filepath.Join(out, s.Krew))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", s.Krew, err)
	}
	if m.Spec.Version != s.Version || len(m.Spec.Platforms) != 5 {
		t.Fatalf("%s: version %s with %d platforms, want %s with 5", s.Krew, m.Spec.Version, len(m.Spec.Platforms), s.Version)
	}
	license, err := os.ReadFile(filepath.Join(repoRoot(t), "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Spec.Platforms {
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		name := path.Base(p.URI)
		if !strings.HasPrefix(p.URI, "https://") || !strings.Contains(p.URI, "/"+s.Version+"/") {
			t.Errorf("%s/%s: uri %s names no release %s", goos, arch, p.URI, s.Version)
		}
		file := filepath.Join(out, name)
		if got := fileSum(t, file); got != p.SHA256 {
			t.Errorf("%s: sha256 %s, the manifest says %s", name, got, p.SHA256)
		}
		bin := archived(t, file, p.Bin)
		if got := binaryPlatform(t, bin); got != goos+"/"+arch {
			t.Errorf("%s: %s is a %s binary, the manifest's selector %s/%s", name, p.Bin, got, goos, arch)
		}
		if !bytes.Equal(archived(t, file, "LICENSE"), license) {
			t.Errorf("%s: its LICENSE is not the repository's", name)
		}
	}
}

func archived(t *testing.T, file, name string) []byte {
	t.Helper()
	if strings.HasSuffix(file, ".zip") {
		zr, err := zip.OpenReader(file)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			if f.Name == name {
				rc, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				data, _ := io.ReadAll(rc)
				return data
			}
		}
		t.Fatalf("%s has no %s", file, name)
	}
	data, ok := untar(t, file)[name]
	if !ok {
		t.Fatalf("%s has no %s", file, name)
	}
	return data
}

// binaryPlatform names a binary's os/arch from its format and machine.
func binaryPlatform(t *testing.T, data []byte) string {
	r := bytes.NewReader(data)
	if f, err := macho.NewFile(r); err == nil {
		return "darwin/" + map[macho.Cpu]string{macho.CpuAmd64: "amd64", macho.CpuArm64: "arm64"}[f.Cpu]
	}
	if f, err := pe.NewFile(r); err == nil {
		return "windows/" + map[uint16]string{pe.IMAGE_FILE_MACHINE_AMD64: "amd64", pe.IMAGE_FILE_MACHINE_ARM64: "arm64"}[f.Machine]
	}
	f := elfFile(t, "binary", data)
	for arch, m := range machines {
		if f.Machine == m {
			return "linux/" + arch
		}
	}
	return fmt.Sprintf("linux/%s", f.Machine)
}
