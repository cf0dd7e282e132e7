package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"testing"
)

func readTgz(t *testing.T, file string, want map[string]*string) {
	t.Helper()
	f, err := os.Open(file)
	must(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	must(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		if p, ok := want[h.Name]; ok {
			b, err := io.ReadAll(tr)
			must(t, err)
			*p = string(b)
		}
	}
}
