package deployed

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// startServers builds the image and starts the servers in parallel, and
// stops them when the test ends.
func startServers(t *testing.T, e *testenv.Env, started time.Time) *servers {
	// Everything slow starts at once: the image build and the servers.
	work := t.TempDir()
	auditArgs, auditLog, err := auditFlags(work)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg        sync.WaitGroup
		archive   string
		cp        *testenv.ControlPlane
		my        *testenv.MySQLCluster
		cph       *testenv.Ceph
		rmq       *testenv.RabbitMQ
		errs      [5]error
		buildTook time.Duration
	)
	wg.Add(5)
	go func() {
		defer wg.Done()
		s := time.Now()
		archive, errs[0] = buildImage(e.RepoRoot, work)
		buildTook = time.Since(s)
	}()
	go func() {
		defer wg.Done()
		cp, errs[1] = e.StartAPIServer(testenv.ControlPlaneOptions{CRDDirectoryPaths: []string{"charts/rekey/crds"}, APIServerArgs: auditArgs})
	}()
	// A server that misses its start deadline (the harness's, on a loaded
	// machine) gets one more try; the first failure is reported.
	var retried []string
	var retriedMu sync.Mutex
	twice := func(what string, start func() error) error {
		err := start()
		if err != nil {
			retriedMu.Lock()
			retried = append(retried, fmt.Sprintf("%s: %v", what, err))
			retriedMu.Unlock()
			err = start()
		}
		return err
	}
	go func() {
		defer wg.Done()
		errs[2] = twice("mysqld", func() (err error) {
			my, err = e.StartMySQLCluster(testenv.MySQLOptions{NoReplicas: true})
			return err
		})
	}()
	go func() {
		defer wg.Done()
		errs[3] = twice("ceph-mon", func() (err error) { cph, err = e.StartCeph(); return err })
	}()
	go func() {
		defer wg.Done()
		errs[4] = twice("rabbitmq-server", func() (err error) { rmq, err = e.StartRabbitMQ(); return err })
	}()
	wg.Wait()
	for _, r := range retried {
		t.Logf("started again after: %s", r)
	}
	if cp != nil {
		t.Cleanup(func() {
			if t.Failed() {
				cp.KeepDir = true
				t.Logf("control plane logs kept: %s", strings.Join(cp.LogPaths(), " "))
			}
			cp.Stop()
		})
	}
	if my != nil {
		t.Cleanup(my.Stop)
	}
	if cph != nil {
		t.Cleanup(cph.Stop)
	}
	if rmq != nil {
		t.Cleanup(rmq.Stop)
	}
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	t.Logf("make image in %s; servers up in %s", buildTook.Round(time.Second), time.Since(started).Round(time.Second))

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
	k8s, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &servers{work: work, archive: archive, auditLog: auditLog, cp: cp, my: my, cph: cph, rmq: rmq, k8s: k8s}
}
