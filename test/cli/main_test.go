// Package cli tests the real kubectl-rekey binary, built once per run, as a
// user runs it: a subprocess with a kubeconfig, against a real kube-apiserver
// and etcd with rekey's CRD installed. No operator runs; tests play it by
// writing status through the status subresource and creating
// events.k8s.io/v1 Events. Every run is checked for leaked passwords.
package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

var (
	bin  string // the kubectl-rekey binary under test
	cp   *testenv.ControlPlane
	k8s  client.Client
	work string // scratch: the binary, kubeconfigs, an empty HOME
	home string // HOME of every run: empty, so ~/.kube/config never leaks in
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	env, err := testenv.Load()
	if err != nil {
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

// result is one run of the binary.
type result struct {
	args           []string
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("kubectl-rekey %s: exit %d after %s\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.elapsed.Round(time.Millisecond), r.stdout, r.stderr)
}

// invocation is how a run reaches the cluster.
type invocation struct {
	kubeconfigEnv string // KUBECONFIG; "" leaves it unset
}

// in is the usual way: KUBECONFIG naming a kubeconfig whose context
// namespace is ns, as after kubectl config set-context --current --namespace.
func in(t *testing.T, ns string) invocation {
	t.Helper()
	return invocation{kubeconfigEnv: kubeconfigFor(t, ns)}
}

// noConfig runs without KUBECONFIG, with an empty HOME: flags must say all.
var noConfig = invocation{}

var (
	kubeconfigMu sync.Mutex
	kubeconfigs  = map[string]string{}
)

// kubeconfigFor writes (once) a copy of the admin kubeconfig whose current
// context defaults to namespace ns.
func kubeconfigFor(t *testing.T, ns string) string {
	t.Helper()
	kubeconfigMu.Lock()
	defer kubeconfigMu.Unlock()
	if p, ok := kubeconfigs[ns]; ok {
		return p
	}
	cfg, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		t.Fatalf("%s: no current context", cp.Kubeconfig)
	}
	ctx.Namespace = ns
	p := filepath.Join(work, "kubeconfig-"+ns)
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	kubeconfigs[ns] = p
	return p
}

// syncBuffer is a buffer the test may read while the process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// running is the binary running in the background; wait for it with finish.
type running struct {
	cmd            *exec.Cmd
	args           []string
	stdout, stderr *syncBuffer
	done           chan result
}

// printed waits until the running command has printed want on stdout: the
// test plays the operator's next step only once the binary has seen this one.
func (r *running) printed(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(r.stdout.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("kubectl-rekey %v did not print %q within 20s; stdout so far:\n%s", r.args, want, r.stdout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (inv invocation) start(t *testing.T, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cmd := exec.CommandContext(ctx, bin, args...)
	// A clean environment: nothing from the developer's shell (KUBECONFIG,
	// KUBERNETES_SERVICE_HOST, ~/.kube) may decide where the binary goes.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
	if inv.kubeconfigEnv != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+inv.kubeconfigEnv)
	}
	r := &running{cmd: cmd, args: args, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan result, 1)}
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	began := time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer cancel()
		err := cmd.Wait()
		res := result{args: args, stdout: r.stdout.String(), stderr: r.stderr.String(), elapsed: time.Since(began)}
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			res.code = exit.ExitCode()
		default:
			res.code, res.stderr = -1, res.stderr+"\n(test: "+err.Error()+")"
		}
		r.done <- res
	}()
	return r
}

// finish waits for a background run and checks it for leaks.
func (r *running) finish(t *testing.T) result {
	t.Helper()
	select {
	case res := <-r.done:
		t.Logf("%s", res)
		checkNoLeak(t, res)
		return res
	case <-time.After(70 * time.Second):
		t.Fatalf("kubectl-rekey %v did not return", r.args)
	}
	return result{}
}

// run runs the binary to completion.
func (inv invocation) run(t *testing.T, args ...string) result {
	t.Helper()
	return inv.start(t, args...).finish(t)
}

// ok runs a command that must succeed.
func (inv invocation) ok(t *testing.T, args ...string) result {
	t.Helper()
	r := inv.run(t, args...)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	return r
}

// fails runs a command that must exit 1, print nothing on stdout and one
// error on stderr that starts with "error: " and contains want.
func (inv invocation) fails(t *testing.T, want string, args ...string) result {
	t.Helper()
	r := inv.run(t, args...)
	checkFailure(t, r, want)
	return r
}

func checkFailure(t *testing.T, r result, want string) {
	t.Helper()
	if r.code != 1 || !strings.HasPrefix(r.stderr, "error: ") || !strings.Contains(r.stderr, want) {
		t.Errorf("want exit 1 and stderr \"error: ...%s...\":\n%s", want, r)
	}
	if strings.Count(r.stderr, "error: ") != 1 {
		t.Errorf("the error is not printed exactly once:\n%s", r)
	}
	if strings.Contains(r.stderr, "Usage:") || strings.Contains(r.stdout, "Usage:") {
		t.Errorf("an error buries itself under the usage text:\n%s", r)
	}
}

// Passwords the tests put in Secrets. No run but show may print one.
var (
	secretsMu sync.Mutex
	secrets   = map[string]bool{}
	scanned   atomic.Int32
)

func secretCount() int {
	secretsMu.Lock()
	defer secretsMu.Unlock()
	return len(secrets)
}

// password returns a fresh random password and remembers it.
func password() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	pw := "pw" + hex.EncodeToString(b)
	secretsMu.Lock()
	secrets[pw] = true
	secretsMu.Unlock()
	return pw
}

// valueFlags are the global flags the tests pass that take a separate value.
var valueFlags = map[string]bool{
	"--kubeconfig": true, "--context": true, "-n": true, "--namespace": true, "--as": true, "--as-group": true,
	"--token": true, "--server": true, "-s": true, "--certificate-authority": true, "--request-timeout": true,
	"--cluster": true, "--user": true,
}

// subcommand is the first argument that is neither a flag nor a flag's
// value (valueFlags are the global flags taking a value).
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case valueFlags[a]:
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

// checkNoLeak fails the test if a run other than show printed any known
// password, or show printed one on stderr.
func checkNoLeak(t *testing.T, r result) {
	t.Helper()
	scanned.Add(1)
	secretsMu.Lock()
	defer secretsMu.Unlock()
	for pw := range secrets {
		if strings.Contains(r.stderr, pw) {
			t.Errorf("a password appears on stderr:\n%s", r)
		}
		if subcommand(r.args) != "show" && strings.Contains(r.stdout, pw) {
			t.Errorf("%q printed a password; only show may:\n%s", subcommand(r.args), r)
		}
	}
}

var nsSeq atomic.Int32

// namespace creates a namespace of the test's own.
func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("cli-%d", nsSeq.Add(1))
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// newSet creates a set of two external instances with users orders and
// billing (admin ops-admin, not rotated), distributing to ns/<name>-db and
// restarting Deployment orders-api; and the distribution Secret holding a
// random password per user, as the operator would have written it.
// It returns the passwords by Secret key.
func newSet(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{Hosts: []string{"db-0.example.internal:3306", "db-1.example.internal:3306"}},
				Admin:     v1.MySQLAdmin{User: "ops-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: name + "-admin", Key: "password"}},
				Users:     []v1.MySQLUser{{Name: "orders"}, {Name: "billing", Host: "10.%"}},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-db"}},
			Consumers:    []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "orders-api"}},
		},
	}
	if err := k8s.Create(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	pws := map[string]string{"ORDERS_PASSWORD": password(), "BILLING_PASSWORD": password()}
	data := map[string][]byte{}
	for k, v := range pws {
		data[k] = []byte(v)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-db"}, Data: data},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-admin"}, Data: map[string][]byte{"password": []byte(password())}},
	} {
		if err := k8s.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	return pws
}

func getSet(t *testing.T, ns, name string) *v1.CredentialSet {
	t.Helper()
	cs := &v1.CredentialSet{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// status plays the operator: it sets the status through the subresource.
func status(t *testing.T, ns, name string, st v1.CredentialSetStatus) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cs := getSet(t, ns, name)
		cs.Status = st
		return k8s.Status().Update(context.Background(), cs)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func idleAt(gen int64) v1.CredentialSetStatus {
	since := metav1.NewTime(time.Now().Add(-5 * time.Hour))
	return v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: gen, CurrentSince: &since, ConsumersUpdated: "1/1"}
}

func distributedAt(gen int64, id string) v1.CredentialSetStatus {
	st := idleAt(gen)
	st.Phase, st.RotationID, st.RotateApplied, st.ConsumersUpdated = v1.PhaseDistributed, id, true, "0/1"
	return st
}

// warn plays the operator's events.k8s.io recorder: a Warning about the set.
func warn(t *testing.T, ns, name, reason, note string) {
	t.Helper()
	cs := getSet(t, ns, name)
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, GenerateName: name + "-"},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "rekey.io/manager", ReportingInstance: "rekey-test",
		Action: "Reconcile", Reason: reason, Type: corev1.EventTypeWarning, Note: note,
		Regarding: corev1.ObjectReference{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet",
			Namespace: ns, Name: name, UID: cs.UID},
	}
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

// annotationAppears waits until the set carries annotation key (written by
// a run in the background) and returns its value.
func annotationAppears(t *testing.T, r *running, ns, name, key string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if v := getSet(t, ns, name).Annotations[key]; v != "" {
			return v
		}
		select {
		case res := <-r.done:
			t.Fatalf("the command ended before writing %s:\n%s", key, res)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within 20s", key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func contains(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}
