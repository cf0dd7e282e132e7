package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// summary is release.json: what was built, for the docs and the test.
type summary struct {
	Version    string               `json:"version"`
	Revision   string               `json:"revision,omitempty"`
	Epoch      int64                `json:"sourceDateEpoch"`
	Repository string               `json:"repository"`
	Index      string               `json:"index"`
	Images     map[string]archImage `json:"images"`
	Chart      string               `json:"chart"`
	Krew       string               `json:"krew"`
	Archives   map[string]string    `json:"archives"`
}

type archImage struct {
	Manifest string     `json:"manifest"`
	SBOM     string     `json:"sbom"`
	Packages int        `json:"debianPackages"`
	Sizes    imageSizes `json:"sizes"`
}

func build(c config) error {
	if c.version == "" {
		meta, err := os.ReadFile(filepath.Join(c.src, "charts/rekey/Chart.yaml"))
		if err != nil {
			return err
		}
		m := regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)`).FindSubmatch(meta)
		if m == nil {
			return fmt.Errorf("no appVersion in charts/rekey/Chart.yaml: give -version")
		}
		c.version = string(m[1])
	}
	if err := os.RemoveAll(c.out); err != nil {
		return err
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "rekey-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	s := summary{Version: c.version, Revision: c.revision, Epoch: c.epoch.Unix(), Repository: c.repo,
		Images: map[string]archImage{}, Archives: map[string]string{}}
	// How long each step took is printed, not written into the release:
	// release.json must be the same bytes in every build.
	timed := func(what string, start time.Time) {
		fmt.Printf("%s: %.1f s\n", what, time.Since(start).Seconds())
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range c.arches {
		start := time.Now()
		debs, err := readLock(c.lock, arch)
		if err != nil {
			return err
		}
		debLayer := layerFiles{}
		for _, d := range debs {
			file, err := fetchDeb(c.mirror, c.cache, d)
			if err != nil {
				return err
			}
			data, err := debData(file)
			if err != nil {
				return err
			}
			if err := debLayer.addDeb(d, data); err != nil {
				return err
			}
		}
		if err := debLayer.finish(); err != nil {
			return err
		}
		mgrFile := filepath.Join(work, "manager-linux-"+arch)
		if err := goBuild(c, "linux", arch, "./cmd/manager", mgrFile, ""); err != nil {
			return err
		}
		mgr, err := os.ReadFile(mgrFile)
		if err != nil {
			return err
		}
		img, sz, err := buildImage(c, arch, debLayer, managerFiles(mgr, c.uid))
		if err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		sbom, err := imageSBOM(c, arch, digest.String(), mgr, debs)
		if err != nil {
			return err
		}
		sbomFile := fmt.Sprintf("rekey-%s-linux-%s.spdx.json", c.version, arch)
		if err := os.WriteFile(filepath.Join(c.out, sbomFile), sbom, 0o644); err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch, Variant: variant(arch)}}})
		s.Images[arch] = archImage{Manifest: digest.String(), SBOM: sbomFile, Packages: countAll(debs), Sizes: sz}
		timed("image-"+arch, start)
	}
	idx = mutate.Annotations(idx, map[string]string{
		"org.opencontainers.image.source":  c.home,
		"org.opencontainers.image.version": c.version,
		"org.opencontainers.image.created": c.epoch.Format(time.RFC3339),
	}).(v1.ImageIndex)
	start := time.Now()
	archive := fmt.Sprintf("rekey-%s.oci.tar", c.version)
	if err := writeLayout(c, idx, filepath.Join(c.out, "oci"), filepath.Join(c.out, archive)); err != nil {
		return err
	}
	timed("layout", start)
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	s.Index = d.String()

	start = time.Now()
	chart, err := packageChart(c, filepath.Join(c.src, "charts/rekey"), c.out, s.Index)
	if err != nil {
		return err
	}
	s.Chart = filepath.Base(chart)
	timed("chart", start)

	start = time.Now()
	manifest, err := os.ReadFile(filepath.Join(c.src, "hack/krew/rekey.yaml"))
	if err != nil {
		return err
	}
	platforms, err := krewPlatforms(manifest)
	if err != nil {
		return err
	}
	for _, p := range platforms {
		one := time.Now()
		bin := filepath.Join(work, p.os+"-"+p.arch, p.bin)
		stamp := "-X rekey.io/rekey/internal/plugin.version=" + c.version
		if c.revision != "" {
			stamp += " -X rekey.io/rekey/internal/plugin.commit=" + c.revision
		}
		if err := goBuild(c, p.os, p.arch, "./cmd/kubectl-rekey", bin, stamp); err != nil {
			return err
		}
		file, err := pluginArchive(c, p, bin, c.out)
		if err != nil {
			return err
		}
		if s.Archives[p.archive], err = fileSHA256(file); err != nil {
			return err
		}
		timed("plugin "+p.os+"/"+p.arch, one)
	}
	filled, err := fillKrew(c, manifest, s.Archives)
	if err != nil {
		return err
	}
	s.Krew = "rekey.krew.yaml"
	if err := os.WriteFile(filepath.Join(c.out, s.Krew), filled, 0o644); err != nil {
		return err
	}
	timed("plugins", start)

	sum, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.out, "release.json"), append(sum, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeSums(c.out); err != nil {
		return err
	}
	fmt.Printf("%s: image index %s (%s), chart %s, krew %s\n", c.out, s.Index, strings.Join(c.arches, ", "), s.Chart, s.Krew)
	return nil
}

func countAll(debs []debPkg) int {
	n := 0
	for _, d := range debs {
		if len(d.Files) == 0 {
			n++
		}
	}
	return n
}

// writeSums writes SHA256SUMS of every file at the top of dir (the layout
// directory is the oci-archive's content).
func writeSums(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var lines []string
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		lines = append(lines, sum+"  "+e.Name())
	}
	sort.Strings(lines)
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
