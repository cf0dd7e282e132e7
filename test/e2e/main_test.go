// Package e2e proves rekey's rotation end to end: a real kube-apiserver
// and etcd (envtest), a real MySQL cluster (primary, two replicas and a
// downstream cluster's instance), and the real manager — in-process for most
// tests, as a separate process where a test kills it.
package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/testenv"
)

// OperatorNamespace holds the source Secrets in every test.
const OperatorNamespace = "rekey-system"

var (
	env    *testenv.Env
	cp     *testenv.ControlPlane
	k8s    client.Client
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Manager logs go to a file per run (kept for failures), never to the
	// test output by default: REKEY_TEST_LOGS=1 shows them.
	logOut := io.Writer(io.Discard)
	if f, err := os.CreateTemp("", "rekey-e2e-manager-*.log"); err == nil {
		logOut, managerLog = f, f.Name()
		fmt.Printf("manager log: %s\n", f.Name())
		defer f.Close()
	}
	if os.Getenv("REKEY_TEST_LOGS") != "" {
		logOut = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logOut), zap.UseDevMode(true)))
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
	var err error
	if env, err = testenv.Load(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if cp, err = env.StartAPIServer(testenv.ControlPlaneOptions{CRDDirectoryPaths: []string{"config/crd/bases"}}); err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	defer cp.Stop()
	fmt.Printf("kube-apiserver %s\n", cp.Version)
	if k8s, err = client.New(cp.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OperatorNamespace}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if processLogDir, err = os.MkdirTemp("", "rekey-e2e-manager-processes-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sampler := startSecretSampler(k8s, cp.Config.Host)
	code := m.Run()
	if err := sampler.scan(k8s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		os.RemoveAll(processLogDir)
	} else {
		fmt.Printf("manager process logs kept in %s\n", processLogDir)
	}
	if managerBinary != "" {
		os.RemoveAll(filepath.Dir(managerBinary))
	}
	if code == 0 && managerLog != "" {
		os.Remove(managerLog) // kept only when something failed
	}
	return code
}

// startManager runs the manager in this process until the test ends.
func startManager(t testing.TB, cfg *rest.Config, opts ...func(*controller.Reconciler)) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: controller.CacheByObject()},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		// Tests start a manager each; the name check is per process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("rekey"), Namespace: OperatorNamespace,
		DefaultGracePeriod: managerGracePeriod, InstanceConcurrency: 8,
	}
	for _, o := range opts {
		o(r)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	stopped := managerRunning(cfg.Host)
	go func() {
		err := mgr.Start(ctx)
		stopped()
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

var managerBinary string

// managerLog is the in-process managers' log file, scanned for secrets.
var managerLog string

// buildManager builds cmd/manager once per test binary.
func buildManager(t testing.TB) string {
	t.Helper()
	if managerBinary != "" {
		return managerBinary
	}
	dir, err := os.MkdirTemp("", "rekey-manager-")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "manager")
	// rekeytest: the crash tests arm failpoints (REKEY_FAILPOINT) and the
	// HA tests' control runs switch the fence off (REKEY_TEST_UNFENCED),
	// which only this build can.
	cmd := exec.Command("go", "build", "-tags", "rekeytest", "-o", out, "./cmd/manager")
	cmd.Dir = env.RepoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build manager: %v\n%s", err, b)
	}
	managerBinary = out
	return out
}
