package plugin

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release, set when building one:
//
//	go build -ldflags "-X rekey.io/rekey/internal/plugin.version=v0.3.0" ./cmd/kubectl-rekey
//
// Without it, the version is the main module's from the build info (Go
// stamps a pseudo-version from the git checkout), else "(devel)".
var version = ""

// commit is the commit a release was built from (-X ...plugin.commit=): a
// release builds with -buildvcs=false from an exported tree, so the build
// info carries no VCS stamp to read it from.
var commit = ""

// buildInfo is what version prints: the version, the commit built and
// whether the tree was modified, the Go toolchain and platform.
type buildInfo struct {
	Version, Commit, GoVersion, Platform string
	Modified                             bool
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if ok {
		if b.Version == "" && info.Main.Version != "" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	return b
}

func versionString() string { return readBuildInfo().Version }

func newVersionCommand(o Options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			b := readBuildInfo()
			commit := b.Commit
			if commit == "" {
				commit = "unknown"
			}
			if b.Modified {
				commit += " (modified)"
			}
			fmt.Fprintf(o.Out, "kubectl-rekey %s\ncommit: %s\ngo: %s %s\n", b.Version, commit, b.GoVersion, b.Platform)
			return nil
		},
	}
}
