package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/testenv"
)

// rolloutCP is the control plane of the matrix test running now (nil
// between them); cp and k8s point at it while that test runs.
var rolloutCP *testenv.ControlPlane

// matrixCluster starts the MySQL cluster of a matrix test and, at the same
// time (they take seconds each; in parallel the test waits for the slower
// only), a full control plane of its own (API server, etcd, controller-
// manager, scheduler, kwok) on which the Deployment consumers really roll
// out. The suite's shared API server has no controllers. Until the test
// ends, cp and k8s are that control plane (as TestRolloutGate does), and
// its Secrets are sampled and scanned for leaks like the suite's.
func matrixCluster(t *testing.T, opts testenv.MySQLOptions) *testenv.MySQLCluster {
	t.Helper()
	var c *testenv.MySQLCluster
	rolloutPlane(t, "the MySQL cluster", func() {
		c = testenv.MySQLClusterForTest(t, opts)
		nameInstances(append(c.Instances(), c.Downstream)...)
	})
	return c
}

// pgMatrixCluster is matrixCluster for PostgreSQL: a primary and its
// streaming replica beside the full control plane.
func pgMatrixCluster(t *testing.T) *testenv.Postgres {
	t.Helper()
	var p *testenv.Postgres
	rolloutPlane(t, "PostgreSQL", func() { p = testenv.PostgresForTest(t) })
	return p
}

// rolloutPlane starts the full control plane while servers starts the
// test's database servers (named what in the log), and makes cp and k8s
// that control plane until the test ends.
func rolloutPlane(t *testing.T, what string, servers func()) {
	t.Helper()
	type started struct {
		cp  *testenv.ControlPlane
		err error
	}
	ch := make(chan started, 1)
	begin := time.Now()
	var cpTook time.Duration
	go func() {
		c, err := env.StartAPIServer(testenv.ControlPlaneOptions{CRDDirectoryPaths: []string{"config/crd/bases"}, Full: true})
		cpTook = time.Since(begin)
		ch <- started{c, err}
	}()
	wait := func() started {
		s := <-ch
		ch <- s
		return s
	}
	// Registered first, so it runs last: the manager, the consumers and the
	// servers are gone by then.
	t.Cleanup(func() {
		s := wait()
		if s.cp == nil {
			return
		}
		if t.Failed() {
			s.cp.KeepDir = true
			t.Logf("control plane logs kept: %s", strings.Join(s.cp.LogPaths(), " "))
		}
		if err := s.cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	servers()
	serversTook := time.Since(begin)
	s := wait()
	if s.err != nil {
		t.Fatalf("full control plane: %v", s.err)
	}
	plane := s.cp
	kc, err := client.New(plane.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := kc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OperatorNamespace}}); err != nil {
		t.Fatal(err)
	}
	sharedCP, sharedK8s := cp, k8s
	cp, k8s, rolloutCP = plane, kc, plane
	sampler := startSecretSampler(kc, plane.Config.Host)
	t.Cleanup(func() {
		if err := sampler.scan(kc); err != nil {
			t.Error(err)
		}
		cp, k8s, rolloutCP = sharedCP, sharedK8s, nil
	})
	// The figures say what the control plane costs the test: only what it
	// took beyond the servers adds to its time.
	t.Logf("full control plane for the consumers: kube-apiserver %s, fake node %s; started in %s, %s in %s",
		plane.Version, plane.NodeName, cpTook.Round(100*time.Millisecond), what, serversTook.Round(100*time.Millisecond))
}
