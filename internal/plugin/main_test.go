package plugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// One real kube-apiserver and etcd for the package; each test works in a
// namespace of its own. No operator runs: tests write status themselves.
var (
	cp  *testenv.ControlPlane
	k8s client.Client
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	env, err := testenv.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if cp, err = env.StartAPIServer(testenv.ControlPlaneOptions{CRDDirectoryPaths: []string{"config/crd/bases"}}); err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	defer cp.Stop()
	if k8s, err = client.New(cp.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// kubectl runs the plugin in-process against the test API server, in ns.
func kubectl(t *testing.T, ns string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRootCommand(Options{Out: &out, Err: &errOut})
	root.SetArgs(append([]string{"--kubeconfig", cp.Kubeconfig, "-n", ns}, args...))
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// mustFail runs a command that must fail with an error containing want.
func mustFail(t *testing.T, ns, want string, args ...string) {
	t.Helper()
	_, _, err := kubectl(t, ns, args...)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("kubectl rekey %v: error %v, want one containing %q", args, err, want)
	}
}

var nsSeq atomic.Int32

func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("plugin-%d", nsSeq.Add(1))
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// hostsSet is a set of two external instances with one application user.
func hostsSet(ns, name string) *v1.CredentialSet {
	return &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{Hosts: []string{"db-0.example.internal:3306", "db-1.example.internal:3307"}},
				Admin:     v1.MySQLAdmin{User: "ops-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "ops", Key: "password"}},
				Users:     []v1.MySQLUser{{Name: "orders"}},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-db"}},
			Consumers:    []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "orders-api"}},
		},
	}
}

func create(t *testing.T, cs *v1.CredentialSet) *v1.CredentialSet {
	t.Helper()
	if err := k8s.Create(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// setStatus plays the operator: it writes status through the subresource.
func setStatus(t *testing.T, ns, name string, mutate func(*v1.CredentialSetStatus)) {
	t.Helper()
	cs := get(t, ns, name)
	mutate(&cs.Status)
	if err := k8s.Status().Update(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, ns, name string) *v1.CredentialSet {
	t.Helper()
	cs := &v1.CredentialSet{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

func idle(gen int64) func(*v1.CredentialSetStatus) {
	return func(st *v1.CredentialSetStatus) {
		now := metav1.Now()
		st.Phase, st.KeyGeneration, st.CurrentSince, st.RotationID = v1.PhaseIdle, gen, &now, ""
	}
}

func distributed(id string) func(*v1.CredentialSetStatus) {
	return func(st *v1.CredentialSetStatus) {
		st.Phase, st.RotationID, st.RotateApplied, st.ConsumersUpdated = v1.PhaseDistributed, id, true, "0/1"
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func hasLine(t *testing.T, out, want string) {
	t.Helper()
	for _, l := range lines(out) {
		if strings.TrimRight(l, " ") == want {
			return
		}
	}
	t.Errorf("output lacks line %q:\n%s", want, out)
}
