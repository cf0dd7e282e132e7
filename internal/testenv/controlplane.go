package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane is a Kubernetes API server backed by its own etcd, started
// through controller-runtime's envtest from the pinned binaries in Env.BinDir.
//
// With ControlPlaneOptions.Full it also runs kube-controller-manager,
// kube-scheduler and kwok with one fake node, so that workloads really roll
// out: the StatefulSet and Deployment controllers create pods, the scheduler
// binds them to the node, and kwok plays that node's kubelet.
//
// What kwok simulates, and what it does not: kwok writes node and pod
// status from stage rules (see writeKwokStages) and nothing else. No
// container runs, no image is pulled, no readiness, liveness or startup
// probe executes, and no volume is mounted, so environment variables,
// Secrets and ConfigMaps referenced by a pod are never read. A pod turns
// Running and Ready as soon as it is bound, unless the test holds or delays
// it with HoldReadyAnnotation or ReadyDelayAnnotation. Pod and host IPs are
// made up (pods get addresses from 10.244.0.0/16 that nothing listens on);
// EndpointSlices list them, but there is no kube-proxy or cluster DNS, so
// nothing routes there. There is no kubelet API either: logs, exec and
// port-forward fail. Pods never crash or restart by themselves. Tests
// therefore assert on API objects and their status, never on a workload
// actually serving.
type ControlPlane struct {
	Config     *rest.Config // admin (system:masters) connection
	Kubeconfig string       // the same admin connection as a kubeconfig file, for external processes
	Version    string       // kube-apiserver's git version, checked against KUBE_VERSION
	Dir        string       // logs, kubeconfigs, certificates and etcd data
	NodeName   string       // the fake node (Full only)

	// KeepDir leaves Dir in place after Stop, for a failed test's logs.
	KeepDir bool

	env     *Env
	testEnv *envtest.Environment
	kube    kubernetes.Interface
	procs   []*Process // controller-manager, scheduler, kwok; stopped in reverse
	logs    []*os.File // envtest's processes write here
	stopped bool
}

// ControlPlaneOptions shape a control plane.
type ControlPlaneOptions struct {
	// CRDDirectoryPaths are installed at start, relative to the repository
	// root unless absolute (the product's are in config/crd/bases). A path
	// that does not exist is an error.
	CRDDirectoryPaths []string
	// CRDs are installed at start too.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Full adds kube-controller-manager, kube-scheduler and kwok with one
	// fake node, and turns the ServiceAccount admission plugin back on (the
	// controller-manager creates each namespace's default ServiceAccount).
	Full bool
	// APIServerArgs are more kube-apiserver flags, name without "--" to
	// value (e.g. audit-policy-file, audit-log-path).
	APIServerArgs map[string]string
}

const (
	cpStartTimeout = 60 * time.Second
	cpStopGrace    = 10 * time.Second
)

// StartAPIServer starts etcd and kube-apiserver (and, with opts.Full, the
// rest of the control plane) and returns once they serve. On error the
// processes started so far are stopped and Dir is kept for their logs.
func (e *Env) StartAPIServer(opts ControlPlaneOptions) (c *ControlPlane, err error) {
	if err := e.requireControlPlane(opts.Full); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rekey-kube-")
	if err != nil {
		return nil, err
	}
	c = &ControlPlane{Dir: dir, env: e}
	defer func() {
		if err != nil {
			c.KeepDir = true
			_ = c.Stop()
			err = fmt.Errorf("%w (logs: %s)", err, strings.Join(c.LogPaths(), " "))
			c = nil
		}
	}()
	if err := c.startAPIServer(opts); err != nil {
		return c, err
	}
	if opts.Full {
		if err := c.startFull(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// StartFullControlPlane is StartAPIServer with opts.Full set.
func (e *Env) StartFullControlPlane(opts ControlPlaneOptions) (*ControlPlane, error) {
	opts.Full = true
	return e.StartAPIServer(opts)
}

func (c *ControlPlane) startAPIServer(opts ControlPlaneOptions) error {
	e := c.env
	certDir := filepath.Join(c.Dir, "apiserver")
	etcdDir := filepath.Join(c.Dir, "etcd")
	for _, d := range []string{certDir, etcdDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	apiLog, err := c.logFile("kube-apiserver.log")
	if err != nil {
		return err
	}
	etcdLog, err := c.logFile("etcd.log")
	if err != nil {
		return err
	}
	var crdPaths []string
	for _, p := range opts.CRDDirectoryPaths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(e.RepoRoot, p)
		}
		crdPaths = append(crdPaths, p)
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: e.BinDir,
		CRDDirectoryPaths:     crdPaths,
		CRDs:                  opts.CRDs,
		ErrorIfCRDPathMissing: len(crdPaths) > 0,
		// envtest's 20s default is short for a loaded 2-core machine.
		ControlPlaneStartTimeout: cpStartTimeout,
		ControlPlaneStopTimeout:  cpStopGrace,
	}
	api := te.ControlPlane.GetAPIServer()
	// Explicit paths: KUBEBUILDER_ASSETS in the caller's environment must not
	// swap in binaries of another version.
	api.Path = c.deathsigWrapper("kube-apiserver")
	api.CertDir = certDir // the controller-manager signs tokens with its sa-signer.key
	api.Out, api.Err = apiLog, apiLog
	te.ControlPlane.Etcd = &envtest.Etcd{Path: c.deathsigWrapper("etcd"), DataDir: etcdDir, Out: etcdLog, Err: etcdLog}
	args := api.Configure()
	// The default reconciler publishes the advertise address as the
	// kubernetes Service's endpoints; a loopback address is refused there
	// and the apiserver logs the failure every few seconds.
	args.Set("endpoint-reconciler-type", "none")
	for k, v := range opts.APIServerArgs {
		args.Set(k, v)
	}
	if opts.Full {
		// envtest disables ServiceAccount admission because nothing would
		// create default ServiceAccounts; the controller-manager does.
		args.Disable("disable-admission-plugins")
	}
	c.testEnv = te
	if _, err := te.Start(); err != nil {
		c.testEnv = nil
		// envtest leaves nothing running when Start fails before the
		// processes are up; after that it is safe to Stop.
		_ = te.Stop()
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	c.Config = rest.CopyConfig(te.Config)
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, te.KubeConfig, 0o600); err != nil {
		return err
	}
	if c.kube, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("kube-apiserver version: %w", err)
	}
	c.Version = v.GitVersion
	if want := e.Versions["KUBE_VERSION"]; c.Version != want {
		return fmt.Errorf("kube-apiserver reports %s, versions.env pins %s: run `make env`", c.Version, want)
	}
	return nil
}

// Clientset is a typed client for the admin user.
func (c *ControlPlane) Clientset() kubernetes.Interface { return c.kube }

// LogPaths are the log files of every process the control plane started.
func (c *ControlPlane) LogPaths() []string {
	paths, _ := filepath.Glob(filepath.Join(c.Dir, "*.log"))
	return paths
}

// Stop stops every process in reverse start order and removes Dir unless
// KeepDir is set. It is safe to call twice.
func (c *ControlPlane) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, c.procs[i].Stop(cpStopGrace))
	}
	if c.testEnv != nil {
		errs = append(errs, c.testEnv.Stop())
	}
	for _, f := range c.logs {
		f.Close()
	}
	if !c.KeepDir {
		errs = append(errs, os.RemoveAll(c.Dir))
	}
	return errors.Join(errs...)
}

func (c *ControlPlane) logFile(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(c.Dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		c.logs = append(c.logs, f)
	}
	return f, err
}

// deathsigWrapper returns a script that runs the binary with a parent-death
// signal. envtest starts etcd and kube-apiserver without one, so a test
// binary killed before its cleanups (a -timeout panic, a SIGKILL) would
// leave them running; setpriv gives them the same fate as our own children.
func (c *ControlPlane) deathsigWrapper(name string) string {
	bin := filepath.Join(c.env.BinDir, name)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return bin
	}
	path := filepath.Join(c.Dir, name+".sh")
	script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, bin)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return bin
	}
	return path
}

func (e *Env) requireControlPlane(full bool) error {
	if err := e.requireFile(filepath.Join(e.BinDir, ".complete"), "the Kubernetes control plane"); err != nil {
		return err
	}
	bins := []string{"kube-apiserver", "etcd"}
	if full {
		bins = append(bins, "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages/pod-fast-pod-ready.yaml")
	}
	for _, b := range bins {
		if err := e.requireFile(filepath.Join(e.BinDir, b), "the Kubernetes control plane"); err != nil {
			return err
		}
	}
	return e.checkBinaryVersions(full)
}

var (
	binVersionMu sync.Mutex
	binVersions  = map[string]string{} // binary name -> checked version
)

// checkBinaryVersions runs each binary's --version once per test binary:
// the apiserver's version is checked live, the others only this way.
func (e *Env) checkBinaryVersions(full bool) error {
	checks := []struct{ bin, want string }{{"etcd", e.Versions["ETCD_VERSION"]}}
	if full {
		checks = append(checks,
			struct{ bin, want string }{"kube-controller-manager", e.Versions["KUBE_VERSION"]},
			struct{ bin, want string }{"kube-scheduler", e.Versions["KUBE_VERSION"]},
			struct{ bin, want string }{"kwok", e.Versions["KWOK_VERSION"]})
	}
	binVersionMu.Lock()
	defer binVersionMu.Unlock()
	for _, ch := range checks {
		if _, ok := binVersions[ch.bin]; ok {
			continue
		}
		out, err := exec.Command(filepath.Join(e.BinDir, ch.bin), "--version").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s --version: %v: %s", ch.bin, err, out)
		}
		if !versionIn(string(out), ch.want) {
			return fmt.Errorf("%s --version says %q, versions.env pins %s: run `make env`", ch.bin, strings.TrimSpace(string(out)), ch.want)
		}
		binVersions[ch.bin] = ch.want
	}
	return nil
}

// versionIn reports whether a --version output names the version, with or
// without its "v": etcd prints "3.6.16", kube's components "v1.37.2".
func versionIn(out, want string) bool {
	want = strings.TrimPrefix(want, "v")
	for _, f := range strings.FieldsFunc(out, func(r rune) bool { return strings.ContainsRune(" \t\n,;:()\"", r) }) {
		if strings.TrimPrefix(f, "v") == want {
			return true
		}
	}
	return false
}

// APIServerForTest starts kube-apiserver and etcd for the test and stops them
// when it ends; a failed test keeps the logs and names them.
func APIServerForTest(t testing.TB, opts ControlPlaneOptions) *ControlPlane {
	t.Helper()
	e := Require(t)
	c, err := e.StartAPIServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.KeepDir = true
			t.Logf("control plane logs kept: %s", strings.Join(c.LogPaths(), " "))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	t.Logf("kube-apiserver %s, etcd %s (%s)", c.Version, e.Versions["ETCD_VERSION"], c.Config.Host)
	if opts.Full {
		t.Logf("kube-controller-manager %s, kube-scheduler %s, kwok %s; fake node %s",
			e.Versions["KUBE_VERSION"], e.Versions["KUBE_VERSION"], e.Versions["KWOK_VERSION"], c.NodeName)
	}
	return c
}

// FullControlPlaneForTest is APIServerForTest with opts.Full set.
func FullControlPlaneForTest(t testing.TB, opts ControlPlaneOptions) *ControlPlane {
	t.Helper()
	opts.Full = true
	return APIServerForTest(t, opts)
}
