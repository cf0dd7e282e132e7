package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

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
