// Package deployed runs the manager's image as the Helm chart deploys it —
// with runc, as a kubelet's runtime would — against a real API server and
// real MySQL, Ceph and RabbitMQ servers, with nothing but the chart's RBAC.
package deployed

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"rekey.io/rekey/internal/testenv"
)

const (
	releaseNamespace = "rekey-system"
	appNamespace     = "apps"
)

// TestImageAsChartDeploysIt builds the image with `make image`, unpacks it
// into an OCI bundle and runs it with runc exactly as the chart's
// Deployment asks (args, env, user, read-only root, its emptyDir, the
// ServiceAccount token from the TokenRequest API, the in-cluster
// variables), with only the RBAC objects the chart renders. From there the
// manager completes a MySQL rotation, a Ceph in-place rotation and a
// RabbitMQ rotation on real servers. Any request the API server forbids
// the manager fails the test.
func TestImageAsChartDeploysIt(t *testing.T) {
	started := time.Now()
	if os.Geteuid() != 0 {
		t.Fatal("running the image needs root (runc creates namespaces and mounts); this test never skips")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal("runc is not installed: run `make env` (hack/env/runc.sh)")
	}
	e := testenv.Require(t)
	helm, err := e.Tool("helm")
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := exec.Command(runc, "--version").Output()
	t.Logf("%s", strings.Split(string(rv), "\n")[0])

	srv := startServers(t, e, started)
	ch := applyChart(t, e, helm, srv)
	run, token := startPod(t, srv, ch)
	t.Logf("container ready %s after start", time.Since(started).Round(time.Second))

	sets, adminKey := createSets(t, srv)
	secrets := rotateAndDiscard(t, srv, run, sets)
	checkMetrics(t, srv, ch, run)
	logText := checkProbesAndLog(t, ch, run)
	checkAudit(t, srv, ch, run)
	secrets["ServiceAccount token"], secrets["Ceph admin key"] = token, adminKey
	for what, s := range secrets {
		if s != "" && bytes.Contains(logText, []byte(s)) {
			t.Errorf("the container log holds the %s", what)
		}
	}
	if peak := run.peakMemory(); peak > 0 {
		lim := run.container.Resources.Limits[corev1.ResourceMemory]
		t.Logf("container memory: peak %.0f MiB under the chart's %s limit", float64(peak)/(1<<20), lim.String())
	}
	t.Logf("container log: %d lines, no refusal, no credential; whole test %s", strings.Count(string(logText), "\n"),
		time.Since(started).Round(time.Second))
}

// servers are what the test starts at once: the image build, the API
// server (with its audit log) and the MySQL, Ceph and RabbitMQ servers;
// k8s is the admin's client.
type servers struct {
	work, archive, auditLog string
	cp                      *testenv.ControlPlane
	my                      *testenv.MySQLCluster
	cph                     *testenv.Ceph
	rmq                     *testenv.RabbitMQ
	k8s                     client.Client
}

// chart is what the chart rendered and the test applied as the admin.
type chart struct {
	dep                     *appsv1.Deployment
	roles                   map[string][]rbacv1.PolicyRule // kind/namespace/name → rules
	bindings                []rbacv1.RoleBinding           // ClusterRoleBindings with an empty namespace
	metricsPort, healthPort int
}

// envtest logs through controller-runtime's logger; nothing here reads it.
func init() { ctrllog.SetLogger(logr.Discard()) }
