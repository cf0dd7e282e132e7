// Command image writes rekey's container image as an OCI image layout in a tar
// archive (what `skopeo copy oci-archive:` or `ctr import` read), without a
// registry or a container engine, using only the standard library.
//
// Layer 1 holds the files of pinned Debian packages taken from an installed
// root (the test environment's sid chroot): the dependency closure of the
// -packages seeds as recorded in var/lib/dpkg/status, minus -exclude, plus
// single files picked from other packages (-files, e.g. /usr/bin/ceph from
// ceph-common, whose other contents are daemons' tools). Documentation, man
// pages and locales are left out. Layer 2 holds the manager at /rekey,
// /etc/passwd and /etc/group naming the numeric user, and a world-writable
// /tmp. Every entry has mtime 0 and owner 0:0, so the same inputs give the
// same digest.
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	root := flag.String("root", "", "installed Debian root to take package files from")
	manager := flag.String("manager", "", "statically built manager binary")
	out := flag.String("out", "bin/rekey-image.tar", "OCI archive to write")
	pkgs := flag.String("packages", "", "comma-separated seed packages; their Depends closure is included")
	exclude := flag.String("exclude", "", "comma-separated packages never included (not needed at run time)")
	files := flag.String("files", "", "comma-separated single files to include from the root")
	uid := flag.Int("uid", 65532, "numeric user and group the image runs as")
	ref := flag.String("ref", "rekey:dev", "image reference name annotation")
	list := flag.String("list", "", "if set, write the package list with versions to this file")
	flag.Parse()
	if *root == "" || *manager == "" {
		log.Fatal("-root and -manager are required")
	}
	status, err := readStatus(filepath.Join(*root, "var/lib/dpkg/status"))
	if err != nil {
		log.Fatal(err)
	}
	closure, err := depClosure(status, split(*pkgs), split(*exclude))
	if err != nil {
		log.Fatal(err)
	}
	var paths []string
	for _, p := range closure {
		l, err := pkgFiles(*root, p)
		if err != nil {
			log.Fatal(err)
		}
		paths = append(paths, l...)
	}
	paths = append(paths, split(*files)...)
	debLayer, err := debianLayer(*root, paths)
	if err != nil {
		log.Fatal(err)
	}
	appLayer, err := managerLayer(*manager, *uid)
	if err != nil {
		log.Fatal(err)
	}
	if err := writeOCI(*out, *ref, *uid, [][]byte{debLayer, appLayer}); err != nil {
		log.Fatal(err)
	}
	if *list != "" {
		var b strings.Builder
		for _, p := range closure {
			fmt.Fprintf(&b, "%s %s\n", p, status[p]["Version"])
		}
		if err := os.WriteFile(*list, []byte(b.String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("%s: %d packages, layers %d + %d bytes (gzip)\n", *out, len(closure), len(debLayer), len(appLayer))
}

func split(s string) []string {
	var r []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			r = append(r, f)
		}
	}
	return r
}

// readStatus parses dpkg's status file: installed packages by name.
func readStatus(file string) (map[string]map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	res := map[string]map[string]string{}
	provides := map[string]string{}
	for _, para := range strings.Split(string(data), "\n\n") {
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
		if fields["Package"] == "" || !strings.Contains(fields["Status"], " installed") {
			continue
		}
		res[fields["Package"]] = fields
		for _, p := range strings.Split(fields["Provides"], ",") {
			if n := depName(p); n != "" {
				provides[n] = fields["Package"]
			}
		}
	}
	for virt, real := range provides {
		if _, ok := res[virt]; !ok {
			res[virt] = map[string]string{"Package": real, "virtual": "true"}
		}
	}
	return res, nil
}

func depName(d string) string {
	d = strings.TrimSpace(d)
	if i := strings.IndexAny(d, " ("); i >= 0 {
		d = d[:i]
	}
	d, _, _ = strings.Cut(d, ":")
	return d
}

// depClosure follows Depends and Pre-Depends from the seeds; of alternatives
// (a | b) the first installed one is taken.
func depClosure(status map[string]map[string]string, seeds, exclude []string) ([]string, error) {
	ex := map[string]bool{}
	for _, e := range exclude {
		ex[e] = true
	}
	seen := map[string]bool{}
	var walk func(string) error
	walk = func(p string) error {
		f, ok := status[p]
		if !ok {
			return fmt.Errorf("package %s is not installed in the root", p)
		}
		if f["virtual"] == "true" {
			p, f = f["Package"], status[f["Package"]]
		}
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
					if n := depName(alt); status[n] != nil {
						pick = n
						break
					}
				}
				if pick == "" {
					return fmt.Errorf("%s: no installed package for %q", p, strings.TrimSpace(dep))
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
	var r []string
	for p := range seen {
		r = append(r, p)
	}
	sort.Strings(r)
	return r, nil
}

func pkgFiles(root, p string) ([]string, error) {
	for _, name := range []string{p + ":amd64.list", p + ".list", p + ":all.list"} {
		data, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/info", name))
		if err == nil {
			var r []string
			for _, l := range strings.Split(string(data), "\n") {
				if l != "" && l != "/." {
					r = append(r, l)
				}
			}
			return r, nil
		}
	}
	return nil, fmt.Errorf("no file list for package %s", p)
}

var skipPrefixes = []string{"/usr/share/doc/", "/usr/share/man/", "/usr/share/locale/", "/usr/share/lintian/",
	"/usr/share/info/", "/usr/share/bug/", "/usr/share/doc-base/", "/usr/share/bash-completion/"}

func skipped(p string) bool {
	for _, s := range skipPrefixes {
		if strings.HasPrefix(p+"/", s) {
			return true
		}
	}
	return false
}

type entry struct {
	hdr  *tar.Header
	data []byte
	src  string
}

var epoch = time.Unix(0, 0).UTC()

// debianLayer tars the listed paths (and their parent directories) from root.
// Debian's merged /usr means /lib, /bin and /lib64 are symlinks; a listed path
// under them is stored under /usr as well, where the link leads.
func debianLayer(root string, paths []string) ([]byte, error) {
	entries := map[string]*tar.Header{}
	srcs := map[string]string{}
	var add func(p string) error
	add = func(p string) error {
		p = path.Clean("/" + p)
		if p == "/" || skipped(p) || entries[p[1:]] != nil {
			return nil
		}
		dir := path.Dir(p)
		real, err := filepath.EvalSymlinks(filepath.Join(root, dir))
		if errors_Is(err) {
			return nil
		} else if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, real)
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("%s leads out of the root", dir)
		}
		if rdir := path.Clean("/" + filepath.ToSlash(rel)); rdir != dir {
			// A directory on the way is a symlink (merged /usr: /lib -> usr/lib):
			// ship the links and the file where they lead.
			for pre := dir; pre != "/"; pre = path.Dir(pre) {
				if fi, err := os.Lstat(filepath.Join(root, pre)); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
					if err := add(pre); err != nil {
						return err
					}
				}
			}
			return add(path.Join(rdir, path.Base(p)))
		}
		if err := add(dir); err != nil {
			return err
		}
		src := filepath.Join(root, p)
		fi, err := os.Lstat(src)
		if errors_Is(err) {
			return nil // listed by dpkg but removed (e.g. diverted); nothing to ship
		} else if err != nil {
			return err
		}
		h := &tar.Header{Name: p[1:], ModTime: epoch, Mode: int64(fi.Mode().Perm()), Format: tar.FormatPAX}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(src)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, t, 0o777
		case fi.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case fi.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
			srcs[p[1:]] = src
		default:
			return nil
		}
		if fi.Mode()&fs.ModeSetuid != 0 || fi.Mode()&fs.ModeSetgid != 0 {
			h.Mode &^= 0o6000
		}
		entries[strings.TrimSuffix(h.Name, "/")] = h
		return nil
	}
	for _, p := range paths {
		if err := add(p); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var es []entry
	for _, n := range names {
		es = append(es, entry{hdr: entries[n], src: srcs[n]})
	}
	return gzipTar(es)
}

func errors_Is(err error) bool { return err != nil && os.IsNotExist(err) }

func managerLayer(manager string, uid int) ([]byte, error) {
	bin, err := os.ReadFile(manager)
	if err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\nrekey:x:%d:%d:rekey:/tmp:/usr/sbin/nologin\n", uid, uid)
	group := fmt.Sprintf("root:x:0:\nrekey:x:%d:\n", uid)
	es := []entry{
		{hdr: &tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755}},
		{hdr: &tar.Header{Name: "etc/group", Typeflag: tar.TypeReg, Mode: 0o644}, data: []byte(group)},
		{hdr: &tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644}, data: []byte(passwd)},
		{hdr: &tar.Header{Name: "rekey", Typeflag: tar.TypeReg, Mode: 0o755}, data: bin},
		{hdr: &tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}},
	}
	for _, e := range es {
		e.hdr.ModTime, e.hdr.Format = epoch, tar.FormatPAX
		e.hdr.Size = int64(len(e.data))
	}
	return gzipTar(es)
}

func gzipTar(es []entry) ([]byte, error) {
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	tw := tar.NewWriter(gz)
	for _, e := range es {
		if err := tw.WriteHeader(e.hdr); err != nil {
			return nil, err
		}
		switch {
		case e.src != "":
			f, err := os.Open(e.src)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(tw, bufio.NewReader(f))
			f.Close()
			if err != nil {
				return nil, err
			}
		case e.data != nil:
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    map[string]string `json:"platform,omitempty"`
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func diffID(gz []byte) (string, error) {
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func writeOCI(out, ref string, uid int, layers [][]byte) error {
	var diffIDs []string
	var layerDescs []descriptor
	for _, l := range layers {
		d, err := diffID(l)
		if err != nil {
			return err
		}
		diffIDs = append(diffIDs, d)
		layerDescs = append(layerDescs, descriptor{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: digest(l), Size: int64(len(l))})
	}
	config, _ := json.Marshal(map[string]any{
		"created":      epoch.Format(time.RFC3339),
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"User":       fmt.Sprintf("%d:%d", uid, uid),
			"Entrypoint": []string{"/rekey"},
			"Env":        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"},
			"WorkingDir": "/",
			"Labels":     map[string]string{"org.opencontainers.image.source": "https://github.com/rekey/rekey"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digest(config), Size: int64(len(config))},
		"layers":        layerDescs,
	})
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []descriptor{{MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: digest(manifest), Size: int64(len(manifest)),
			Annotations: map[string]string{"org.opencontainers.image.ref.name": ref},
			Platform:    map[string]string{"architecture": "amd64", "os": "linux"}}},
	})
	var es []entry
	es = append(es, entry{hdr: &tar.Header{Name: "blobs/", Typeflag: tar.TypeDir, Mode: 0o755}},
		entry{hdr: &tar.Header{Name: "blobs/sha256/", Typeflag: tar.TypeDir, Mode: 0o755}})
	for _, b := range append([][]byte{config, manifest}, layers...) {
		es = append(es, entry{hdr: &tar.Header{Name: "blobs/sha256/" + strings.TrimPrefix(digest(b), "sha256:"), Typeflag: tar.TypeReg, Mode: 0o644}, data: b})
	}
	es = append(es, entry{hdr: &tar.Header{Name: "index.json", Typeflag: tar.TypeReg, Mode: 0o644}, data: index},
		entry{hdr: &tar.Header{Name: "oci-layout", Typeflag: tar.TypeReg, Mode: 0o644}, data: []byte(`{"imageLayoutVersion":"1.0.0"}`)})
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, e := range es {
		e.hdr.ModTime, e.hdr.Format, e.hdr.Size = epoch, tar.FormatPAX, int64(len(e.data))
		if err := tw.WriteHeader(e.hdr); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}
