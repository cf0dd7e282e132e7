package main

import (
	"bytes"
	"fmt"

	"os/exec"
	"sort"
	"strconv"
	"strings"
)

// updateLock resolves the image's packages from the mirror's signed index
// for each architecture and writes the lock: the Release file is checked
// with gpgv against Debian's archive keyring, each Packages index against
// the Release file's sha256, and each .deb later against the index's.
func updateLock(lockFile, mirror, suite, keyring string, arches, seeds, exclude []string, files map[string][]string) error {
	base := strings.TrimSuffix(mirror, "/") + "/dists/" + suite + "/"
	inRelease, err := httpGet(base + "InRelease")
	if err != nil {
		return err
	}
	var gerr bytes.Buffer
	gpgv := exec.Command("gpgv", "--keyring", keyring, "-")
	gpgv.Stdin, gpgv.Stderr = bytes.NewReader(inRelease), &gerr
	if err := gpgv.Run(); err != nil {
		return fmt.Errorf("the mirror's InRelease does not verify with %s: %v: %s", keyring, err, gerr.String())
	}
	sums := map[string]string{}
	var date string
	for _, para := range paragraphs(strings.SplitN(string(inRelease), "\n\n", 2)[1]) {
		if para["SHA256"] != "" {
			for _, l := range strings.Split(para["SHA256"], "\n") {
				if f := strings.Fields(l); len(f) == 3 {
					sums[f[2]] = f[0]
				}
			}
			date = para["Date"]
		}
	}
	indexOf := func(component string) ([]map[string]string, error) {
		name := "main/" + component + "/Packages.xz"
		xzData, err := httpGet(base + name)
		if err != nil {
			return nil, err
		}
		if want := sums[name]; want == "" || sha256Hex(xzData) != want {
			return nil, fmt.Errorf("%s: sha256 %s, Release says %q", name, sha256Hex(xzData), want)
		}
		var out, errb bytes.Buffer
		xz := exec.Command("xz", "-dc")
		xz.Stdin, xz.Stdout, xz.Stderr = bytes.NewReader(xzData), &out, &errb
		if err := xz.Run(); err != nil {
			return nil, fmt.Errorf("xz -dc %s: %v: %s", name, err, errb.String())
		}
		return paragraphs(out.String()), nil
	}
	all, err := indexOf("binary-all")
	if err != nil {
		return err
	}
	var pkgs []debPkg
	for _, arch := range arches {
		own, err := indexOf("binary-" + arch)
		if err != nil {
			return err
		}
		index := indexMap(append(append([]map[string]string{}, own...), all...))
		names, err := closure(index, seeds, exclude)
		if err != nil {
			return fmt.Errorf("%s: %v", arch, err)
		}
		extra := make([]string, 0, len(files))
		for n := range files {
			extra = append(extra, n)
		}
		sort.Strings(extra)
		for _, n := range append(names, extra...) {
			f := index[n]
			if f == nil {
				return fmt.Errorf("%s: package %s is not in the index", arch, n)
			}
			size, _ := strconv.ParseInt(f["Size"], 10, 64)
			p := debPkg{Arch: arch, Name: n, Version: f["Version"], SHA256: f["SHA256"], Size: size, Filename: f["Filename"]}
			if fs, ok := files[n]; ok && !contains(names, n) {
				p.Files = fs
			}
			pkgs = append(pkgs, p)
		}
	}
	header := fmt.Sprintf("# The Debian packages of rekey's image, per architecture: written by make release-lock\n"+
		"# (hack/release -update-lock) from the test environment's mirror (SID_MIRROR), suite %s,\n"+
		"# Release dated %s, its signature checked. make release downloads exactly these\n"+
		"# files from that mirror and checks their sha256.\n", suite, date)
	return writeLock(lockFile, header, pkgs)
}

// indexMap: stanzas by package name, then virtual names by their first
// provider in name order (a real package of that name wins).
func indexMap(stanzas []map[string]string) map[string]map[string]string {
	idx := map[string]map[string]string{}
	for _, s := range stanzas {
		if s["Package"] == "" {
			continue
		}
		if _, ok := idx[s["Package"]]; !ok {
			idx[s["Package"]] = s
		}
	}
	providers := map[string][]string{}
	for _, s := range stanzas {
		for _, p := range strings.Split(s["Provides"], ",") {
			if n := depName(p); n != "" {
				providers[n] = append(providers[n], s["Package"])
			}
		}
	}
	for virt, ps := range providers {
		if _, ok := idx[virt]; ok {
			continue
		}
		sort.Strings(ps)
		idx[virt] = idx[ps[0]]
	}
	return idx
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
