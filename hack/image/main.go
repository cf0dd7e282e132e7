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
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
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
