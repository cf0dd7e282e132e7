package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

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
		if notExist(err) {
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
		if notExist(err) {
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

// notExist: a path dpkg lists may be gone from the root (diverted, removed).
func notExist(err error) bool { return err != nil && os.IsNotExist(err) }

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
