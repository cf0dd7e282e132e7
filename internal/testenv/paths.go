package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Env is where the prepared environment lives and which versions it pins.
type Env struct {
	RepoRoot string
	Cache    string
	BinDir   string // control plane binaries
	SidDir   string // Debian unstable chroot with mysqld and ceph
	ToolsDir string // helm and kustomize
	Versions map[string]string
}

var (
	envOnce sync.Once
	env     *Env
	envErr  error
)

// Load finds the repository, reads hack/env/versions.env and checks that the
// environment has been prepared.
func Load() (*Env, error) {
	envOnce.Do(func() { env, envErr = load() })
	return env, envErr
}

func load() (*Env, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	versions, err := readEnvFile(filepath.Join(root, "hack/env/versions.env"))
	if err != nil {
		return nil, err
	}
	cache := os.Getenv("REKEY_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, err
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "rekey")
	}
	e := &Env{
		RepoRoot: root,
		Cache:    cache,
		BinDir: filepath.Join(cache, "bin", fmt.Sprintf("kube-%s-etcd-%s-kwok-%s",
			versions["KUBE_VERSION"], versions["ETCD_VERSION"], versions["KWOK_VERSION"])),
		SidDir: filepath.Join(cache, "sid"),
		ToolsDir: filepath.Join(cache, "bin", fmt.Sprintf("tools-helm-%s-kustomize-%s",
			versions["HELM_VERSION"], versions["KUSTOMIZE_VERSION"])),
		Versions: versions,
	}
	return e, nil
}

// Tool returns the path of a pinned tool binary (helm, kustomize).
func (e *Env) Tool(name string) (string, error) {
	p := filepath.Join(e.ToolsDir, name)
	return p, e.requireFile(filepath.Join(e.ToolsDir, ".complete"), name)
}

// Promtool returns the pinned promtool (taken from Debian's prometheus
// package by hack/env/promtool.sh) and the version it reports.
func (e *Env) Promtool() (path, version string, err error) {
	path = filepath.Join(e.Cache, "bin", "promtool-"+e.Versions["PROMETHEUS_SERIES"], "promtool")
	if err := e.requireFile(path, "promtool"); err != nil {
		return "", "", err
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("%s --version: %v: %s", path, err, out)
	}
	version, _, _ = strings.Cut(strings.TrimPrefix(string(out), "promtool, version "), " ")
	if !strings.HasPrefix(version, e.Versions["PROMETHEUS_SERIES"]) {
		return "", "", fmt.Errorf("%s is version %q, versions.env pins %s*: run `make env`", path, version, e.Versions["PROMETHEUS_SERIES"])
	}
	return path, version, nil
}

func (e *Env) requireFile(path, what string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s is not prepared (%s missing): run `make env` first", what, path)
	}
	return nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack/env/versions.env")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: no hack/env/versions.env above the working directory")
		}
		dir = parent
	}
}

func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: malformed line %q", path, line)
		}
		out[k] = v
	}
	return out, sc.Err()
}
