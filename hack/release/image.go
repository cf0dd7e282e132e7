package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageSizes are the figures docs/image.md quotes.
type imageSizes struct {
	DebianLayer, ManagerLayer int64 // gzip, as pushed
	Unpacked                  int64 // bytes of the files
	Files                     int
}

// buildImage assembles one architecture's image: the Debian layer, then the
// manager's, with a config naming the platform, the user and the entrypoint.
func buildImage(c config, arch string, debLayer, appLayer layerFiles) (v1.Image, imageSizes, error) {
	var sz imageSizes
	var layers []mutate.Addendum
	for _, l := range []struct {
		files layerFiles
		by    string
		size  *int64
	}{
		{debLayer, "Debian packages of the ceph CLI (see the SBOM)", &sz.DebianLayer},
		{appLayer, "rekey manager at /rekey, user " + fmt.Sprint(c.uid), &sz.ManagerLayer},
	} {
		for _, e := range l.files {
			sz.Unpacked += int64(len(e.data))
			sz.Files++
		}
		tb, err := l.files.tarBytes(c.epoch)
		if err != nil {
			return nil, sz, err
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(tb)), nil
		}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression), tarball.WithCompressedCaching)
		if err != nil {
			return nil, sz, err
		}
		if *l.size, err = layer.Size(); err != nil {
			return nil, sz, err
		}
		layers = append(layers, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: c.epoch}, CreatedBy: l.by}})
	}
	cfg := &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Variant:      variant(arch),
		Created:      v1.Time{Time: c.epoch},
		Config: v1.Config{
			User:       fmt.Sprintf("%d:%d", c.uid, c.uid),
			Entrypoint: []string{"/rekey"},
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"},
			WorkingDir: "/",
			Labels: map[string]string{
				"org.opencontainers.image.source":   c.home,
				"org.opencontainers.image.version":  c.version,
				"org.opencontainers.image.revision": c.revision,
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	base, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, sz, err
	}
	img, err := mutate.Append(base, layers...)
	if err != nil {
		return nil, sz, err
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	return img, sz, nil
}

func variant(arch string) string {
	if arch == "arm64" {
		return "v8"
	}
	return ""
}

// writeLayout writes the index (and through it every image) as an OCI image
// layout, index.json naming it by the version, and the same directory as an
// oci-archive tarball (what skopeo copy oci-archive: reads).
func writeLayout(c config, idx v1.ImageIndex, dir, archive string) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": c.version,
	})); err != nil {
		return err
	}
	return tarDir(dir, archive, c)
}

// tarDir writes a directory's files as a tar archive in path order, owned by
// 0:0, every mtime the epoch.
func tarDir(dir, archive string, c config) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, p := range names {
		rel := filepath.ToSlash(strings.TrimPrefix(p, dir+string(filepath.Separator)))
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: rel, ModTime: c.epoch, Format: tar.FormatPAX, Mode: 0o644, Typeflag: tar.TypeReg, Size: fi.Size()}
		if fi.IsDir() {
			h.Name, h.Typeflag, h.Mode, h.Size = rel+"/", tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
