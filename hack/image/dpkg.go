package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

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
