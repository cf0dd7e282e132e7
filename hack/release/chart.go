package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// packageChart writes charts/<name> as `helm package` would (a gzipped tar of
// <name>/...), with Chart.yaml's version and appVersion the release's and
// values.yaml's image.repository and image.digest the built index's, so the
// chart's default installs exactly the image built with it.
func packageChart(c config, chartDir, out, digest string) (string, error) {
	chartVersion := strings.TrimPrefix(c.version, "v")
	files := map[string][]byte{}
	err := filepath.WalkDir(chartDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(chartDir, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		return "", err
	}
	meta, ok := files["Chart.yaml"]
	if !ok {
		return "", fmt.Errorf("%s has no Chart.yaml", chartDir)
	}
	name := ""
	if m := regexp.MustCompile(`(?m)^name:\s*(\S+)`).FindSubmatch(meta); m != nil {
		name = string(m[1])
	}
	if files["Chart.yaml"], err = setField(meta, `(?m)^version:.*$`, "version: "+chartVersion); err != nil {
		return "", err
	}
	if files["Chart.yaml"], err = setField(files["Chart.yaml"], `(?m)^appVersion:.*$`, "appVersion: "+c.version); err != nil {
		return "", err
	}
	// The first repository: and digest: under image: (two-space indent).
	values := files["values.yaml"]
	if values, err = setField(values, `(?m)^(image:\n(?:  .*\n|\s*\n)*?)  repository:.*$`, "${1}  repository: "+c.repo); err != nil {
		return "", err
	}
	if values, err = setField(values, `(?m)^(image:\n(?:  .*\n|\s*\n)*?)  digest:.*$`,
		"${1}  digest: \""+digest+"\" # the image index make release built"); err != nil {
		return "", err
	}
	files["values.yaml"] = values

	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	dirs := map[string]bool{}
	for _, n := range names {
		full := name + "/" + n
		for d := filepath.ToSlash(filepath.Dir(full)); d != "." && !dirs[d]; d = filepath.ToSlash(filepath.Dir(d)) {
			dirs[d] = true
		}
	}
	var entries []string
	for d := range dirs {
		entries = append(entries, d+"/")
	}
	for _, n := range names {
		entries = append(entries, name+"/"+n)
	}
	sort.Strings(entries)
	for _, e := range entries {
		h := &tar.Header{Name: e, ModTime: c.epoch, Format: tar.FormatPAX, Typeflag: tar.TypeDir, Mode: 0o755}
		data := files[strings.TrimPrefix(e, name+"/")]
		if !strings.HasSuffix(e, "/") {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return "", err
		}
		if _, err := tw.Write(data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	file := filepath.Join(out, fmt.Sprintf("%s-%s.tgz", name, chartVersion))
	return file, os.WriteFile(file, buf.Bytes(), 0o644)
}

// setField replaces the one match of re, which must exist.
func setField(data []byte, re, repl string) ([]byte, error) {
	r := regexp.MustCompile(re)
	if n := len(r.FindAllIndex(data, -1)); n != 1 {
		return nil, fmt.Errorf("want one match of %s, found %d", re, n)
	}
	return r.ReplaceAll(data, []byte(repl)), nil
}
