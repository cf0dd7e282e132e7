package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// goBuild builds one command of the source tree, statically and with no
// path, VCS stamp or build ID of this machine in it, so the same tree and
// toolchain give the same bytes anywhere. Microarchitecture levels are the
// baselines, not whatever GOAMD64/GOARM64 the caller's environment sets.
func goBuild(c config, goos, goarch, pkg, out, ldflags string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-mod=readonly",
		"-tags", "kustomize_disable_go_plugin_support", "-ldflags", "-s -w -buildid= "+ldflags, "-o", out, pkg)
	cmd.Dir = c.src
	env := []string{}
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch k {
		case "GOFLAGS", "GOAMD64", "GOARM64", "GOEXPERIMENT", "CGO_ENABLED", "GOOS", "GOARCH":
			continue
		}
		env = append(env, e)
	}
	cmd.Env = append(env, "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOAMD64=v1", "GOARM64=v8.0")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("GOOS=%s GOARCH=%s go build %s: %v\n%s", goos, goarch, pkg, err, errb.String())
	}
	return nil
}
