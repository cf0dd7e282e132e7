// Command release builds what a rekey release publishes, from a source tree
// and with no registry or container engine, into one directory:
//
//   - the manager image for each architecture (go-containerregistry assembles
//     the layers and configs) as one multi-architecture OCI image index, in
//     an OCI layout directory and the same as an oci-archive tarball;
//   - an SPDX 2.3 JSON SBOM per image: the manager's Go modules as its
//     binary records them (debug/buildinfo) and the Debian packages the
//     image's ceph CLI comes from, each .deb with its sha256;
//   - the Helm chart packaged, its default image the built index's digest;
//   - the kubectl-rekey archives for every platform the krew manifest names,
//     and that manifest with their sha256 sums;
//   - SHA256SUMS of all of it.
//
// Every timestamp is -epoch (SOURCE_DATE_EPOCH, the commit's time) and
// every input is pinned (the Go toolchain, go.sum, the Debian lock), so two
// runs give the same bytes. See docs/image.md.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

type config struct {
	src, out, version, repo, mirror, cache, lock string
	home, revision                               string
	epoch                                        time.Time
	arches                                       []string
	uid                                          int
}

func main() {
	var c config
	var epoch int64
	var arches string
	home, _ := os.UserHomeDir()
	flag.StringVar(&c.src, "src", ".", "source tree to build (the repository's root)")
	flag.StringVar(&c.out, "out", "bin/release", "directory to write the release into (emptied first)")
	flag.StringVar(&c.version, "version", "", "release version, vX.Y.Z (default: the chart's appVersion)")
	flag.StringVar(&c.repo, "repo", "ghcr.io/rekey-io/rekey", "image repository the chart and the index name")
	flag.StringVar(&c.mirror, "mirror", "", "Debian mirror holding the lock's pool files (default: SID_MIRROR, else hack/env/lib.sh's)")
	flag.StringVar(&c.cache, "cache", filepath.Join(home, ".cache/rekey/debs"), "where downloaded .debs are kept")
	flag.StringVar(&c.lock, "lock", "", "the pinned Debian packages (default: hack/release/debian.lock of -src)")
	flag.StringVar(&c.home, "home", "https://github.com/rekey-io/rekey", "the project's home: the image's source label, the krew download URLs")
	flag.StringVar(&c.revision, "revision", "", "the commit built, for the image's revision label")
	flag.Int64Var(&epoch, "epoch", -1, "SOURCE_DATE_EPOCH: every timestamp written (default: $SOURCE_DATE_EPOCH)")
	flag.StringVar(&arches, "arches", "amd64,arm64", "image architectures (linux)")
	flag.IntVar(&c.uid, "uid", 65532, "numeric user and group the image runs as")
	update := flag.Bool("update-lock", false, "resolve the packages from the mirror's signed index and rewrite -lock, then stop")
	suite := flag.String("suite", "sid", "Debian suite, for -update-lock")
	seeds := flag.String("packages", "python3-rados,python3-ceph-argparse,python3-prettytable", "for -update-lock: seed packages; their Depends closure goes in the image")
	exclude := flag.String("exclude", "debconf,adduser,perl-base,dpkg,tzdata,readline-common,media-types,netbase", "for -update-lock: packages left out of the closure (nothing runs them)")
	files := flag.String("files", "ceph-common=/usr/bin/ceph", "for -update-lock: pkg=path[:path...] taken alone from a package")
	keyring := flag.String("keyring", "/usr/share/keyrings/debian-archive-keyring.gpg", "for -update-lock: keyring the Release file must verify with")
	flag.Parse()
	c.arches = split(arches)
	if c.mirror == "" {
		c.mirror = os.Getenv("SID_MIRROR")
	}
	if c.mirror == "" {
		m, err := envMirror(c.src)
		if err != nil {
			log.Fatal(err)
		}
		c.mirror = m
	}
	if c.lock == "" {
		c.lock = filepath.Join(c.src, "hack/release/debian.lock")
	}
	if *update {
		fm := map[string][]string{}
		for _, f := range split(*files) {
			pkg, paths, _ := strings.Cut(f, "=")
			fm[pkg] = strings.Split(paths, ":")
		}
		if err := updateLock(c.lock, c.mirror, *suite, *keyring, c.arches, split(*seeds), split(*exclude), fm); err != nil {
			log.Fatal(err)
		}
		fmt.Println("wrote", c.lock)
		return
	}
	if epoch < 0 {
		v, err := fmt.Sscan(os.Getenv("SOURCE_DATE_EPOCH"), &epoch)
		if v != 1 || err != nil {
			fmt.Fprintf(os.Stderr, "-epoch or SOURCE_DATE_EPOCH is required (the commit's time: git log -1 --format=%%ct)\n")
			os.Exit(2)
		}
	}
	c.epoch = time.Unix(epoch, 0).UTC()
	if err := build(c); err != nil {
		log.Fatal(err)
	}
}

// envMirror is the Debian mirror the test environment's sid root comes
// from: the default of SID_MIRROR in hack/env/lib.sh.
func envMirror(src string) (string, error) {
	data, err := os.ReadFile(filepath.Join(src, "hack/env/lib.sh"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`SID_MIRROR=\$\{SID_MIRROR:-([^}]+)\}`).FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("hack/env/lib.sh sets no SID_MIRROR default: give -mirror")
	}
	return string(m[1]), nil
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
