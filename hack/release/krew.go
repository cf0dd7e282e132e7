package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// krewPlatform is one platform of the krew manifest: what to build and the
// archive its uri names.
type krewPlatform struct {
	os, arch, archive, bin string
}

var (
	krewSelector = regexp.MustCompile(`matchLabels:\s*\{os:\s*(\w+),\s*arch:\s*(\w+)\}`)
	krewURI      = regexp.MustCompile(`^(\s*)uri:\s*(\S+)`)
	krewSHA      = regexp.MustCompile(`^(\s*)sha256:`)
	krewBin      = regexp.MustCompile(`^\s*bin:\s*(\S+)`)
	krewVersion  = regexp.MustCompile(`^(\s*)version:`)
	krewComment  = regexp.MustCompile(`\s+# PLACEHOLDER.*$`)
)

// krewPlatforms reads the platforms the manifest (hack/krew/rekey.yaml) names.
func krewPlatforms(manifest []byte) ([]krewPlatform, error) {
	var ps []krewPlatform
	for _, l := range strings.Split(string(manifest), "\n") {
		if m := krewSelector.FindStringSubmatch(l); m != nil {
			ps = append(ps, krewPlatform{os: m[1], arch: m[2]})
		} else if m := krewURI.FindStringSubmatch(l); m != nil && len(ps) > 0 {
			ps[len(ps)-1].archive = path.Base(m[2])
		} else if m := krewBin.FindStringSubmatch(l); m != nil && len(ps) > 0 {
			ps[len(ps)-1].bin = m[1]
		}
	}
	for _, p := range ps {
		if p.archive == "" || p.bin == "" {
			return nil, fmt.Errorf("krew manifest: platform %s/%s has no uri or bin", p.os, p.arch)
		}
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("krew manifest names no platform")
	}
	return ps, nil
}

// fillKrew returns the manifest with the release's version, each uri the
// archive's download URL and each sha256 the archive's.
func fillKrew(c config, manifest []byte, sums map[string]string) ([]byte, error) {
	var out []string
	out = append(out, "# krew plugin manifest of kubectl rekey "+c.version+", written by make release from",
		"# hack/krew/rekey.yaml with the sha256 of each archive it built.")
	var archive string
	header := true
	for _, l := range strings.Split(string(manifest), "\n") {
		if header && strings.HasPrefix(l, "#") {
			continue
		}
		header = false
		l = krewComment.ReplaceAllString(l, "")
		switch {
		case krewVersion.MatchString(l) && !strings.Contains(l, "/"):
			l = krewVersion.FindStringSubmatch(l)[1] + "version: " + c.version
		case krewURI.MatchString(l):
			m := krewURI.FindStringSubmatch(l)
			archive = path.Base(m[2])
			l = fmt.Sprintf("%suri: %s/releases/download/%s/%s", m[1], c.home, c.version, archive)
		case krewSHA.MatchString(l):
			sum, ok := sums[archive]
			if !ok {
				return nil, fmt.Errorf("krew manifest: no archive %q was built", archive)
			}
			l = fmt.Sprintf("%ssha256: %q", krewSHA.FindStringSubmatch(l)[1], sum)
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, "\n")), nil
}

// pluginArchive packs the built binary as the manifest's archive, with
// the repository's LICENSE beside it (krew-index asks for one in each): a
// gzipped tar, or a zip for .zip, both files at the top, every time the
// epoch.
func pluginArchive(c config, p krewPlatform, binFile, dir string) (string, error) {
	bin, err := os.ReadFile(binFile)
	if err != nil {
		return "", err
	}
	license, err := os.ReadFile(filepath.Join(c.src, "LICENSE"))
	if err != nil {
		return "", err
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{{p.bin, 0o755, bin}, {"LICENSE", 0o644, license}}
	var buf bytes.Buffer
	if strings.HasSuffix(p.archive, ".zip") {
		zw := zip.NewWriter(&buf)
		for _, f := range files {
			h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: c.epoch}
			h.SetMode(os.FileMode(f.mode))
			w, err := zw.CreateHeader(h)
			if err != nil {
				return "", err
			}
			if _, err := w.Write(f.data); err != nil {
				return "", err
			}
		}
		if err := zw.Close(); err != nil {
			return "", err
		}
	} else {
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		for _, f := range files {
			h := &tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: f.mode, Size: int64(len(f.data)), ModTime: c.epoch, Format: tar.FormatPAX}
			if err := tw.WriteHeader(h); err != nil {
				return "", err
			}
			if _, err := tw.Write(f.data); err != nil {
				return "", err
			}
		}
		if err := tw.Close(); err != nil {
			return "", err
		}
		if err := gz.Close(); err != nil {
			return "", err
		}
	}
	file := filepath.Join(dir, p.archive)
	return file, os.WriteFile(file, buf.Bytes(), 0o644)
}
