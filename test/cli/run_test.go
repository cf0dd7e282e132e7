package cli

// How a test runs the binary: in the foreground or the background, with a
// kubeconfig of its namespace or none, and what a failed run must look like.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

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

// start runs the binary in the background, with no input.
func (inv invocation) start(t *testing.T, args ...string) *running {
	t.Helper()
	return inv.startWithStdin(t, nil, args...)
}

// startWithStdin runs the binary in the background with stdin reading
// from input (nil: none), as a user answering a question on the terminal.
func (inv invocation) startWithStdin(t *testing.T, input io.Reader, args ...string) *running {
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
	cmd.Stdin, cmd.Stdout, cmd.Stderr = input, r.stdout, r.stderr
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

// runWithStdin runs the binary to completion with stdin holding input, as
// a user answering a question on the terminal.
func (inv invocation) runWithStdin(t *testing.T, input string, args ...string) result {
	t.Helper()
	return inv.startWithStdin(t, strings.NewReader(input), args...).finish(t)
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
