package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// debPkg is one Debian package the image takes files from, as pinned in the
// lock file: the exact .deb (pool path and sha256), so a build takes the
// same bytes whatever the mirror's index says later.
type debPkg struct {
	Arch, Name, Version, SHA256, Filename string
	Size                                  int64
	// Files, when set, are the only paths taken from the package
	// (/usr/bin/ceph from ceph-common, whose other files are daemons' tools);
	// otherwise every file but documentation is.
	Files []string
}

func (p debPkg) role() string {
	if len(p.Files) == 0 {
		return "all"
	}
	return "files=" + strings.Join(p.Files, ",")
}

// readLock reads the lock's lines for one architecture:
// arch name version sha256 size pool-path role.
func readLock(file, arch string) ([]debPkg, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var r []debPkg
	for i, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 7 {
			return nil, fmt.Errorf("%s:%d: want 7 fields, got %d", file, i+1, len(f))
		}
		if f[0] != arch {
			continue
		}
		size, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: size: %v", file, i+1, err)
		}
		p := debPkg{Arch: f[0], Name: f[1], Version: f[2], SHA256: f[3], Size: size, Filename: f[5]}
		if files, ok := strings.CutPrefix(f[6], "files="); ok {
			p.Files = strings.Split(files, ",")
		} else if f[6] != "all" {
			return nil, fmt.Errorf("%s:%d: role %q is neither all nor files=...", file, i+1, f[6])
		}
		r = append(r, p)
	}
	if len(r) == 0 {
		return nil, fmt.Errorf("%s pins no package for %s: run make release-lock", file, arch)
	}
	return r, nil
}

func writeLock(file, header string, pkgs []debPkg) error {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# arch package version sha256 size pool-path role\n")
	for _, p := range pkgs {
		fmt.Fprintf(&b, "%s %s %s %s %d %s %s\n", p.Arch, p.Name, p.Version, p.SHA256, p.Size, p.Filename, p.role())
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// fetchDeb returns the path of the package's .deb in the cache, downloading
// it from the mirror when missing; its sha256 must be the lock's.
func fetchDeb(mirror, cache string, p debPkg) (string, error) {
	dst := filepath.Join(cache, filepath.Base(p.Filename))
	if sum, err := fileSHA256(dst); err == nil && sum == p.SHA256 {
		return dst, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	data, err := httpGet(strings.TrimSuffix(mirror, "/") + "/" + p.Filename)
	if err != nil {
		return "", err
	}
	if sum := sha256Hex(data); sum != p.SHA256 {
		return "", fmt.Errorf("%s: sha256 %s, the lock pins %s", p.Filename, sum, p.SHA256)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp, dst)
}

func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func fileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, bufio.NewReader(f)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// debData returns the data archive of a .deb as an uncompressed tar stream
// (dpkg-deb reads any architecture's package; nothing is run).
func debData(deb string) ([]byte, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %v: %s", deb, err, errb.String())
	}
	return out.Bytes(), nil
}

// paragraphs parses Debian control data (a Packages index): one map per
// stanza, continuation lines joined.
func paragraphs(data string) []map[string]string {
	var r []map[string]string
	for _, para := range strings.Split(data, "\n\n") {
		fields := map[string]string{}
		var last string
		for _, line := range strings.Split(para, "\n") {
			if line == "" {
				continue
			}
			if line[0] == ' ' || line[0] == '\t' {
				fields[last] += "\n" + line
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = k
			fields[k] = strings.TrimSpace(v)
		}
		if len(fields) > 0 {
			r = append(r, fields)
		}
	}
	return r
}

func depName(d string) string {
	d = strings.TrimSpace(d)
	if i := strings.IndexAny(d, " ("); i >= 0 {
		d = d[:i]
	}
	d, _, _ = strings.Cut(d, ":")
	return d
}

// closure follows Depends and Pre-Depends from the seeds through an index
// (package name -> stanza; virtual names -> their provider's stanza); of
// alternatives (a | b) the first the index has is taken, as apt does.
func closure(index map[string]map[string]string, seeds, exclude []string) ([]string, error) {
	ex := map[string]bool{}
	for _, e := range exclude {
		ex[e] = true
	}
	seen := map[string]bool{}
	var walk func(string) error
	walk = func(name string) error {
		f, ok := index[name]
		if !ok {
			return fmt.Errorf("package %s is not in the index", name)
		}
		p := f["Package"]
		if seen[p] || ex[p] {
			return nil
		}
		seen[p] = true
		for _, field := range []string{"Pre-Depends", "Depends"} {
			for _, dep := range strings.Split(f[field], ",") {
				if strings.TrimSpace(dep) == "" {
					continue
				}
				var pick string
				for _, alt := range strings.Split(dep, "|") {
					if n := depName(alt); index[n] != nil {
						pick = n
						break
					}
				}
				if pick == "" {
					return fmt.Errorf("%s: nothing in the index for %q", p, strings.TrimSpace(dep))
				}
				if err := walk(pick); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, s := range seeds {
		if err := walk(s); err != nil {
			return nil, err
		}
	}
	r := make([]string, 0, len(seen))
	for p := range seen {
		r = append(r, p)
	}
	sort.Strings(r)
	return r, nil
}
