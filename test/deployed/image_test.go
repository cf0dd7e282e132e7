package deployed

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// imageConfig is the part of an OCI image config a runtime acts on.
type imageConfig struct {
	User       string   `json:"User"`
	Entrypoint []string `json:"Entrypoint"`
	Cmd        []string `json:"Cmd"`
	Env        []string `json:"Env"`
	WorkingDir string   `json:"WorkingDir"`
}

// buildImage runs `make image` as a user would and returns a copy of the
// archive it wrote (bin/rekey-image.tar).
func buildImage(repo, dir string) (string, error) {
	// Niced: it runs beside the servers' start, which has deadlines.
	cmd := exec.Command("nice", "-n", "10", "make", "-s", "image")
	cmd.Dir = repo
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("make image: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(repo, "bin/rekey-image.tar"))
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "rekey-image.tar")
	return dst, os.WriteFile(dst, data, 0o644)
}

// unpackImage reads an OCI archive (index → manifest → config and layers)
// and applies its layers in order to rootfs, as a runtime's snapshotter
// would, whiteouts included. No entry may lead out of rootfs: an absolute
// or ".." name, or a path through a symlink, is an error.
func unpackImage(archive, rootfs string) (*imageConfig, int64, error) {
	blobs := map[string][]byte{}
	f, err := os.Open(archive)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, 0, err
		}
		blobs[h.Name] = b
	}
	blob := func(digest string) ([]byte, error) {
		algo, hex, ok := strings.Cut(digest, ":")
		if b, found := blobs["blobs/"+algo+"/"+hex]; ok && found {
			return b, nil
		}
		return nil, fmt.Errorf("blob %s missing from the archive", digest)
	}
	type desc struct {
		Digest string `json:"digest"`
	}
	var index struct{ Manifests []desc }
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return nil, 0, fmt.Errorf("index.json: want one manifest (%v)", err)
	}
	mb, err := blob(index.Manifests[0].Digest)
	if err != nil {
		return nil, 0, err
	}
	var manifest struct {
		Config desc
		Layers []desc
	}
	if err := json.Unmarshal(mb, &manifest); err != nil {
		return nil, 0, err
	}
	cb, err := blob(manifest.Config.Digest)
	if err != nil {
		return nil, 0, err
	}
	var cfg struct {
		Config imageConfig `json:"config"`
	}
	if err := json.Unmarshal(cb, &cfg); err != nil {
		return nil, 0, err
	}
	var size int64
	for _, l := range manifest.Layers {
		lb, err := blob(l.Digest)
		if err != nil {
			return nil, 0, err
		}
		n, err := applyLayer(lb, rootfs)
		if err != nil {
			return nil, 0, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		size += n
	}
	return &cfg.Config, size, nil
}

func applyLayer(gz []byte, rootfs string) (int64, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return 0, err
	}
	tr := tar.NewReader(zr)
	var size int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return size, nil
		}
		if err != nil {
			return size, err
		}
		name := path.Clean("/" + h.Name)
		if name == "/" {
			continue
		}
		if slices.Contains(strings.Split(h.Name, "/"), "..") {
			return size, fmt.Errorf("entry %q leads out of the root", h.Name)
		}
		if err := noSymlinkOnTheWay(rootfs, path.Dir(name)); err != nil {
			return size, err
		}
		dst := filepath.Join(rootfs, name)
		base := path.Base(name)
		if base == ".wh..wh..opq" {
			ents, _ := os.ReadDir(filepath.Dir(dst))
			for _, e := range ents {
				os.RemoveAll(filepath.Join(filepath.Dir(dst), e.Name()))
			}
			continue
		}
		if strings.HasPrefix(base, ".wh.") {
			os.RemoveAll(filepath.Join(filepath.Dir(dst), strings.TrimPrefix(base, ".wh.")))
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return size, err
		}
		mode := os.FileMode(h.Mode & 0o7777)
		switch h.Typeflag {
		case tar.TypeDir:
			if fi, err := os.Lstat(dst); err == nil && !fi.IsDir() {
				os.Remove(dst)
			}
			if err := os.MkdirAll(dst, mode); err != nil {
				return size, err
			}
		case tar.TypeReg:
			os.Remove(dst)
			out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
			if err != nil {
				return size, err
			}
			n, err := io.Copy(out, tr)
			out.Close()
			if err != nil {
				return size, err
			}
			size += n
		case tar.TypeSymlink:
			os.RemoveAll(dst)
			if err := os.Symlink(h.Linkname, dst); err != nil {
				return size, err
			}
		case tar.TypeLink:
			target := path.Clean("/" + h.Linkname)
			if err := noSymlinkOnTheWay(rootfs, target); err != nil {
				return size, err
			}
			os.Remove(dst)
			if err := os.Link(filepath.Join(rootfs, target), dst); err != nil {
				return size, err
			}
		default:
			return size, fmt.Errorf("entry %q: type %c not expected in this image", h.Name, h.Typeflag)
		}
		if h.Typeflag != tar.TypeSymlink {
			if err := os.Lchown(dst, h.Uid, h.Gid); err != nil {
				return size, err
			}
			if err := os.Chmod(dst, mode); err != nil {
				return size, err
			}
		}
		_ = os.Chtimes(dst, time.Unix(0, 0), h.ModTime)
	}
}

// noSymlinkOnTheWay fails when a component of p (inside rootfs) is a symlink.
func noSymlinkOnTheWay(rootfs, p string) error {
	cur := rootfs
	for _, c := range strings.Split(strings.Trim(p, "/"), "/") {
		if c == "" {
			continue
		}
		cur = filepath.Join(cur, c)
		fi, err := os.Lstat(cur)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s: a layer entry goes through the symlink %s", p, strings.TrimPrefix(cur, rootfs))
		}
	}
	return nil
}

// dirSize is the bytes of regular files under dir.
func dirSize(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
