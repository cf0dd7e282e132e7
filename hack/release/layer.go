package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"
)

// Documentation, manual pages and translations: nothing at run time reads them.
var skipPrefixes = []string{"usr/share/doc/", "usr/share/man/", "usr/share/locale/", "usr/share/lintian/",
	"usr/share/info/", "usr/share/bug/", "usr/share/doc-base/", "usr/share/bash-completion/"}

// The aliases of Debian's merged /usr: a package may still ship a path under
// /lib or /bin, and binaries name their loader as /lib64/ld-linux-x86-64.so.2
// (amd64) or /lib/ld-linux-aarch64.so.1 (arm64).
var usrAliases = []string{"bin", "lib", "lib32", "lib64", "libx32", "sbin"}

type fileEntry struct {
	hdr  tar.Header
	data []byte
}

// layerFiles collects a layer's entries by path (no leading slash), the
// first package to ship a path keeping it.
type layerFiles map[string]*fileEntry

// addDeb adds the files of one package's data archive: all of them but
// documentation, or only p.Files. Paths under a merged-/usr alias move to
// /usr; setuid and setgid bits are dropped.
func (lf layerFiles) addDeb(p debPkg, data []byte) error {
	only, found := map[string]bool{}, map[string]bool{}
	for _, f := range p.Files {
		only[canonical(f)] = true
	}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %v", p.Name, err)
		}
		name := canonical(h.Name)
		if name == "" || skipped(name) || (len(only) > 0 && !only[name]) {
			continue
		}
		e := &fileEntry{hdr: tar.Header{Name: name, Typeflag: h.Typeflag, Mode: h.Mode &^ 0o6000}}
		switch h.Typeflag {
		case tar.TypeDir:
		case tar.TypeSymlink:
			e.hdr.Linkname = h.Linkname
		case tar.TypeLink:
			e.hdr.Linkname = canonical(h.Linkname)
		case tar.TypeReg:
			if e.data, err = io.ReadAll(tr); err != nil {
				return fmt.Errorf("%s: %s: %v", p.Name, name, err)
			}
		default:
			continue
		}
		if _, ok := lf[name]; !ok {
			lf[name] = e
		}
		found[name] = true
	}
	for f := range only {
		if !found[f] {
			return fmt.Errorf("%s %s ships no %s", p.Name, p.Version, f)
		}
	}
	return nil
}

func canonical(name string) string {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" {
		return ""
	}
	top, rest, _ := strings.Cut(name, "/")
	for _, a := range usrAliases {
		if top == a {
			return path.Join("usr", top, rest)
		}
	}
	return name
}

func skipped(name string) bool {
	for _, s := range skipPrefixes {
		if strings.HasPrefix(name+"/", s) {
			return true
		}
	}
	return false
}

// finish turns hard links into copies (a link sorted before its target
// would not extract), adds the merged-/usr alias links for the /usr
// directories the layer has, and every missing parent directory.
func (lf layerFiles) finish() error {
	for name, e := range lf {
		if e.hdr.Typeflag != tar.TypeLink {
			continue
		}
		t, ok := lf[e.hdr.Linkname]
		if !ok || t.hdr.Typeflag != tar.TypeReg {
			return fmt.Errorf("%s: hard link to %s, which the layer has not as a file", name, e.hdr.Linkname)
		}
		e.hdr.Typeflag, e.hdr.Linkname, e.data = tar.TypeReg, "", t.data
	}
	for name := range lf {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, ok := lf[d]; !ok {
				lf[d] = &fileEntry{hdr: tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}}
			}
		}
	}
	for _, a := range usrAliases {
		if e, ok := lf["usr/"+a]; ok && e.hdr.Typeflag == tar.TypeDir {
			lf[a] = &fileEntry{hdr: tar.Header{Name: a, Typeflag: tar.TypeSymlink, Linkname: "usr/" + a, Mode: 0o777}}
		}
	}
	return nil
}

// tarBytes writes the entries in path order, owned by 0:0, every mtime the
// release's epoch: the same files give the same bytes.
func (lf layerFiles) tarBytes(epoch time.Time) ([]byte, error) {
	names := make([]string, 0, len(lf))
	for n := range lf {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := lf[n]
		h := e.hdr
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		h.Size = int64(len(e.data))
		h.ModTime, h.Format = epoch, tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// managerFiles: the manager at /rekey, the user it runs as and a
// world-writable /tmp (the chart mounts an emptyDir over the ceph work dir).
func managerFiles(bin []byte, uid int) layerFiles {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\nrekey:x:%d:%d:rekey:/tmp:/usr/sbin/nologin\n", uid, uid)
	group := fmt.Sprintf("root:x:0:\nrekey:x:%d:\n", uid)
	return layerFiles{
		"etc":        {hdr: tar.Header{Name: "etc", Typeflag: tar.TypeDir, Mode: 0o755}},
		"etc/group":  {hdr: tar.Header{Name: "etc/group", Typeflag: tar.TypeReg, Mode: 0o644}, data: []byte(group)},
		"etc/passwd": {hdr: tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644}, data: []byte(passwd)},
		"rekey":      {hdr: tar.Header{Name: "rekey", Typeflag: tar.TypeReg, Mode: 0o755}, data: bin},
		"tmp":        {hdr: tar.Header{Name: "tmp", Typeflag: tar.TypeDir, Mode: 0o1777}},
	}
}
