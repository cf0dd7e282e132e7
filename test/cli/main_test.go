// Package cli tests the real kubectl-rekey binary, built once per run, as a
// user runs it: a subprocess with a kubeconfig, against a real kube-apiserver
// and etcd with rekey's CRD installed. No operator runs; tests play it by
// writing status through the status subresource and creating
// events.k8s.io/v1 Events. Every run is checked for leaked passwords.
package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

var (
	bin  string // the kubectl-rekey binary under test
	cp   *testenv.ControlPlane
	k8s  client.Client
	work string // scratch: the binary, kubeconfigs, an empty HOME
	env  *testenv.Env
	home string // HOME of every run: empty, so ~/.kube/config never leaks in
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	var err error
	if env, err = testenv.Load(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if work, err = os.MkdirTemp("", "rekey-cli-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(work)
	home = filepath.Join(work, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin = filepath.Join(work, "kubectl-rekey")
	start := time.Now()
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-rekey")
	build.Dir = env.RepoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/kubectl-rekey: %v\n%s", err, out)
		return 1
	}
	fmt.Fprintf(os.Stderr, "built kubectl-rekey in %s\n", time.Since(start).Round(time.Millisecond))

	if cp, err = env.StartAPIServer(testenv.ControlPlaneOptions{CRDDirectoryPaths: []string{"config/crd/bases"}}); err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	defer cp.Stop()
	fmt.Fprintf(os.Stderr, "kube-apiserver %s at %s\n", cp.Version, cp.Config.Host)
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1.AddToScheme(scheme))
	if k8s, err = client.New(cp.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code == 0 && (secretCount() == 0 || scanned.Load() == 0) {
		// The leak check must have had something to look for.
		fmt.Fprintf(os.Stderr, "leak check inert: %d passwords known, %d runs scanned\n", secretCount(), scanned.Load())
		return 1
	}
	return code
}
