package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// The tests here hold the plugin to what kubectl users expect of kubectl's
// own commands: its global flags, completion, version (-o and -A are in
// output_test.go).

func TestCompletion(t *testing.T) {
	t.Parallel()
	ns, other := namespace(t), namespace(t)
	newSet(t, ns, "orders")
	newSet(t, ns, "ordering")
	newSet(t, ns, "billing")
	newSet(t, other, "elsewhere")
	status(t, ns, "orders", idleAt(1))
	kc := in(t, ns)

	// cobra's hidden __complete is what the shell scripts call.
	complete := func(args ...string) (names []string, directive string) {
		t.Helper()
		r := kc.ok(t, append([]string{"__complete"}, args...)...)
		ls := lines(r.stdout)
		for _, l := range ls[:len(ls)-1] {
			names = append(names, l)
		}
		return names, ls[len(ls)-1]
	}
	for _, cmd := range []string{"rotate", "discard", "show", "abort", "recover", "ack", "status"} {
		names, dir := complete(cmd, "")
		if want := []string{"billing\t-", "ordering\t-", "orders\tIdle"}; !slices.Equal(names, want) {
			t.Errorf("complete %s: %q, want %q", cmd, names, want)
		}
		if dir != ":4" { // ShellCompDirectiveNoFileComp
			t.Errorf("complete %s: directive %q, want :4", cmd, dir)
		}
	}
	if names, _ := complete("rotate", "order"); !slices.Equal(names, []string{"ordering\t-", "orders\tIdle"}) {
		t.Errorf("complete rotate order: %q", names)
	}
	if names, _ := complete("-n", other, "show", ""); !slices.Equal(names, []string{"elsewhere\t-"}) {
		t.Errorf("complete -n %s show: %q", other, names)
	}
	if names, _ := complete("rotate", "orders", ""); len(names) != 0 {
		t.Errorf("a second NAME was offered: %q", names)
	}
	if names, _ := complete("status", "-n", strings.TrimRight(other, "0123456789")); !slices.Contains(names, other) || !slices.Contains(names, ns) {
		t.Errorf("complete -n: %q lacks %s and %s", names, ns, other)
	}

	for shell, want := range map[string]string{
		"bash": "__start_kubectl-rekey",
		"zsh":  "#compdef kubectl-rekey",
		"fish": "complete -c kubectl-rekey",
	} {
		r := noConfig.ok(t, "completion", shell)
		if !strings.Contains(r.stdout, want) || r.stderr != "" {
			t.Errorf("completion %s lacks %q (stderr %q)", shell, want, r.stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := noConfig.ok(t, "version")
	// The test binary is built as GOFLAGS says; this machine sets
	// -buildvcs=false, so the commit may be unknown.
	re := regexp.MustCompile(`^kubectl-rekey (\S+)\ncommit: ([0-9a-f]{40}( \(modified\))?|unknown)\ngo: go1\.\d+\S* [a-z0-9]+/[a-z0-9]+\n$`)
	if !re.MatchString(r.stdout) || r.stderr != "" {
		t.Fatalf("version output does not match %s:\n%s", re, r)
	}

	// A release sets the version at link time; with VCS stamping the
	// commit is the checkout's.
	env, err := testenv.Load()
	if err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join(t.TempDir(), "kubectl-rekey")
	build := exec.Command("go", "build", "-o", rel, "-buildvcs=true", "-ldflags", "-X rekey.io/rekey/internal/plugin.version=v9.8.7-test", "./cmd/kubectl-rekey")
	build.Dir = env.RepoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(rel, "version").Output()
	if err != nil || !regexp.MustCompile(`^kubectl-rekey v9\.8\.7-test\ncommit: [0-9a-f]{40}( \(modified\))?\ngo: `).Match(out) {
		t.Errorf("release build: version printed %q (%v)", out, err)
	}
}

// TestWaitWatches: --wait follows a watch, so it sees every state the set
// passes through, however briefly, and returns as soon as the goal is met.
// A poll every second would miss the Rotating state written 50 ms before
// Distributed.
func TestWaitWatches(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", idleAt(1))

	run := in(t, ns).start(t, "rotate", "orders", "--wait", "--timeout", "30s")
	id := annotationAppears(t, run, ns, "orders", "rekey.io/rotate")
	run.printed(t, "phase Idle, generation 1")
	for i := 0; i < 3; i++ {
		st := idleAt(1)
		st.Phase, st.RotationID, st.ConsumersUpdated = v1.PhaseRotating, id, []string{"0/1", "1/2", "2/3"}[i]
		status(t, ns, "orders", st)
		time.Sleep(50 * time.Millisecond)
	}
	status(t, ns, "orders", distributedAt(1, id))
	done := time.Now()
	r := run.finish(t)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	for _, c := range []string{"0/1", "1/2", "2/3"} {
		contains(t, "rotate --wait", r.stdout, "phase Rotating (rotation "+id+"), generation 1, consumers "+c+" rolled out\n")
	}
	// finish returns when the process exited; allow for process exit and a
	// loaded machine, well under a second's poll plus the slack.
	if took := time.Since(done); took > 3*time.Second {
		t.Errorf("--wait returned %s after the goal was met", took)
	}
}

// TestKubectlGlobalFlags: kubectl's own flags, through cli-runtime.
func TestKubectlGlobalFlags(t *testing.T) {
	t.Parallel()
	a, b := namespace(t), namespace(t)
	newSet(t, a, "alpha")
	newSet(t, b, "beta")

	// --context picks another context of the kubeconfig, with its namespace.
	cfg, err := clientcmd.LoadFromFile(kubeconfigFor(t, a))
	if err != nil {
		t.Fatal(err)
	}
	cur := *cfg.Contexts[cfg.CurrentContext]
	cur.Namespace = b
	cfg.Contexts["team-b"] = &cur
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	kc := invocation{kubeconfigEnv: p}
	if r := kc.ok(t, "status", "-o", "name"); r.stdout != "credentialset.rekey.io/alpha\n" {
		t.Errorf("current context: %q", r.stdout)
	}
	if r := kc.ok(t, "--context", "team-b", "status", "-o", "name"); r.stdout != "credentialset.rekey.io/beta\n" {
		t.Errorf("--context team-b: %q", r.stdout)
	}
	// --context completes from the kubeconfig.
	if r := kc.ok(t, "__complete", "status", "--context", "team"); !strings.HasPrefix(r.stdout, "team-b\n") {
		t.Errorf("complete --context team: %q", r.stdout)
	}

	// --as: a user without RBAC is refused by the API server, which names
	// the user and the resource; one bound to the shipped rekey-view role
	// alone in b may list there (Events included).
	kc.fails(t, `credentialsets.rekey.io is forbidden: User "rekey-nobody" cannot list resource "credentialsets" in API group "rekey.io" in the namespace "`+a+`"`,
		"--as", "rekey-nobody", "status")
	kc.fails(t, `User "rekey-nobody" cannot get resource "credentialsets" in API group "rekey.io" in the namespace "`+b+`"`,
		"--as", "rekey-nobody", "--as-group", "system:authenticated", "-n", b, "rotate", "beta")
	grantRead(t, b, "rekey-reader")
	if r := kc.ok(t, "--as", "rekey-reader", "-n", b, "status"); len(cells(r.stdout)) != 2 || cells(r.stdout)[1][0] != "beta" {
		t.Errorf("--as rekey-reader -n %s status:\n%s", b, r)
	}
	kc.fails(t, `User "rekey-reader" cannot patch resource "credentialsets"`, "--as", "rekey-reader", "-n", b, "rotate", "beta")
	// ... and is told which right it lacks and which shipped role has it.
	kc.fails(t, "you may not patch credentialsets.rekey.io in namespace "+b+", which this command needs: ask for the rekey-edit (or edit) role there", "--as", "rekey-reader", "-n", b, "rotate", "beta")
	if len(getSet(t, b, "beta").Annotations) != 0 {
		t.Error("a refused rotate annotated the set")
	}

	// --request-timeout is kubectl's, parsed by client-go.
	kc.ok(t, "--request-timeout", "30s", "status")
	kc.fails(t, "Invalid timeout value", "--request-timeout", "soon", "status")

	// No kubeconfig at all: --server, --certificate-authority and --token
	// say everything; the API server refuses a made-up token.
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, cp.Config.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	noConfig.fails(t, "the server has asked for the client to provide credentials", "--server", cp.Config.Host, "--certificate-authority", ca, "--token", "made-up-token", "-n", a, "status")
}

// grantRead lets user get, list and watch CredentialSets and Events in ns.
func grantRead(t *testing.T, ns, user string) {
	t.Helper()
	ctx := context.Background()
	// The ClusterRoles the install ships for people, as they are.
	objs, err := env.Manifests("config/rbac/user_roles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if err := k8s.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rekey-view-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "rekey-view"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
	if err := k8s.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
}

// TestShortNames: the CRD offers credset, and no longer cs, which is
// componentstatuses' short name in every cluster.
func TestShortNames(t *testing.T) {
	t.Parallel()
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	l, err := dc.ServerResourcesForGroupVersion(v1.GroupVersion.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range l.APIResources {
		if r.Name == "credentialsets" {
			if !slices.Equal(r.ShortNames, []string{"credset"}) {
				t.Errorf("credentialsets short names %v, want [credset]", r.ShortNames)
			}
			return
		}
	}
	t.Fatalf("discovery lists no credentialsets in %s", v1.GroupVersion)
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }
