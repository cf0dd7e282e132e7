package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/testenv"
)

// The mysqld of each pod of MOCO's StatefulSet. kwok runs no container,
// so the test plays what MOCO's pod runs: mysqld n (instance n) belongs
// to pod moco-<cluster>-n. When the pod is deleted its mysqld stops
// (after MOCO's preStop hook, played: a primary keeps running until
// MOCO's loop has switched it over); when the new pod is bound, mysqld
// starts again on its data, as MOCO starts it: super_read_only, with
// skip_replica_start, so a replica does not replicate until MOCO's
// clustering loop points it at the primary. The pods carry
// testenv.HoldReadyAnnotation from the pod template and are held not
// Ready until moco-agent's readiness probe would pass (played: mysqld
// answers, and a read-only instance replicates with both threads
// running and no error), as the probe gates MOCO's partition controller.

// mocoMySQLPods are the played mysqld of cluster ns/name.
type mocoMySQLPods struct {
	t     testing.TB
	ns    string
	name  string
	insts []*testenv.MySQLInstance

	mu       sync.Mutex
	restarts []mysqldRestart
	events   []chan podEvent
}

type podEvent struct {
	pod     string
	deleted bool
}

// mysqldRestart is what one restart of a pod's mysqld left: whether its
// replication ran once the pod was ready, as whom, and whether with the
// password the test expects (compared here; never kept).
type mysqldRestart struct {
	Pod, Role      string
	IO, SQL        string
	SourceUser     string
	PasswordLength int
	password       string // the replication password in the replica's connection metadata
	Took           time.Duration
	Err            string
}

func (r mysqldRestart) String() string {
	if r.Err != "" {
		return fmt.Sprintf("%s: %s", r.Pod, r.Err)
	}
	if r.Role == "primary" {
		return fmt.Sprintf("%s (primary) ready after %s", r.Pod, r.Took.Round(100*time.Millisecond))
	}
	return fmt.Sprintf("%s (replica) ready after %s: IO %s, SQL %s, as %s with a %d-character password",
		r.Pod, r.Took.Round(100*time.Millisecond), r.IO, r.SQL, r.SourceUser, r.PasswordLength)
}

// playMOCOMySQLPods starts the model for the pods labelled app=moco-<name>
// (mocoCluster's pod template) until the test ends. insts are the mysqld
// by ordinal; they become Managed.
func playMOCOMySQLPods(t testing.TB, ns, name string, insts []*testenv.MySQLInstance) *mocoMySQLPods {
	m := &mocoMySQLPods{t: t, ns: ns, name: name, insts: insts}
	for _, i := range insts {
		i.Managed = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for n := range insts {
		ch := make(chan podEvent, 16)
		m.events = append(m.events, ch)
		wg.Add(1)
		go func() { defer wg.Done(); m.run(ctx, n, ch) }()
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cp.Clientset(), 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app=moco-" + name }))
	seen := map[types.UID]bool{}
	send := func(obj any, deleted bool) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		n, err := strconv.Atoi(p.Name[strings.LastIndex(p.Name, "-")+1:])
		if err != nil || n >= len(insts) {
			return
		}
		deleted = deleted || p.DeletionTimestamp != nil
		m.mu.Lock()
		defer m.mu.Unlock()
		if deleted {
			if seen[p.UID] {
				delete(seen, p.UID)
				m.events[n] <- podEvent{pod: p.Name, deleted: true}
			}
			return
		}
		if p.Spec.NodeName != "" && !seen[p.UID] {
			seen[p.UID] = true
			m.events[n] <- podEvent{pod: p.Name}
		}
	}
	_, err := factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { send(obj, false) }, UpdateFunc: func(_, obj any) { send(obj, false) },
		DeleteFunc: func(obj any) { send(obj, true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		if t.Failed() {
			m.diagnose()
		}
		close(stop)
		factory.Shutdown()
		cancel()
		wg.Wait()
	})
	return m
}

// diagnose logs, for a failed test, what MOCO and each mysqld report.
func (m *mocoMySQLPods) diagnose() {
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("moco.cybozu.com/v1beta2")
	mc.SetKind("MySQLCluster")
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: m.ns, Name: m.name}, mc); err == nil {
		st, _, _ := unstructured.NestedMap(mc.Object, "status")
		m.t.Logf("MySQLCluster status: %v", st)
	}
	for _, i := range m.insts {
		ro, err := i.QueryString("SELECT CONCAT(@@GLOBAL.read_only, '/', @@GLOBAL.super_read_only)")
		st, _ := i.ReplicaStatus()
		m.t.Logf("%s: read_only/super_read_only %s (%v); IO %q SQL %q from port %q as %q; IO error %q; SQL error %q", i.Name, ro, err,
			st["Replica_IO_Running"], st["Replica_SQL_Running"], st["Source_Port"], st["Source_User"], st["Last_IO_Error"], st["Last_SQL_Error"])
	}
}

// run plays pod n's mysqld: stopped with its pod, started with the next.
func (m *mocoMySQLPods) run(ctx context.Context, n int, events <-chan podEvent) {
	inst := m.insts[n]
	first, running := true, true
	for {
		var ev podEvent
		select {
		case <-ctx.Done():
			return
		case ev = <-events:
		}
		if ev.deleted {
			m.preStop(ctx, n)
			inst.Stop()
			running = false
			continue
		}
		start := time.Now()
		if !running {
			if err := inst.Start(); err != nil {
				m.record(mysqldRestart{Pod: ev.pod, Err: "mysqld did not start: " + err.Error()})
				continue
			}
			running = true
		}
		r := m.ready(ctx, ev.pod, inst)
		r.Took = time.Since(start)
		if err := cp.ReleasePodReady(context.Background(), m.ns, ev.pod); err != nil && !strings.Contains(err.Error(), "not found") {
			r.Err = "release: " + err.Error()
		}
		if !first {
			m.record(r)
		}
		first = false
	}
}

// preStop plays MOCO's preStop hook (sleep 20) for a primary: its mysqld
// runs on until MOCO's loop has moved the primary elsewhere. The loop
// learns of the deletion from the harness's terminating annotation (kwok
// has deleted the pod object already). 20 s is MOCO's; here the wait is
// for the switchover, with a hang guard for a loaded machine.
func (m *mocoMySQLPods) preStop(ctx context.Context, n int) {
	if mocoPrimaryIndex(m.t, m.ns, m.name) != n {
		return
	}
	m.annotateCluster(fmt.Sprintf(`{"metadata":{"annotations":{"moco-harness.rekey.io/terminating":"%d"}}}`, n))
	defer m.annotateCluster(`{"metadata":{"annotations":{"moco-harness.rekey.io/terminating":null}}}`)
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		if mocoPrimaryIndex(m.t, m.ns, m.name) != n {
			return
		}
	}
	m.record(mysqldRestart{Pod: fmt.Sprintf("moco-%s-%d", m.name, n), Err: "MOCO did not switch the deleted primary over"})
}

func (m *mocoMySQLPods) annotateCluster(patch string) {
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("moco.cybozu.com/v1beta2")
	mc.SetKind("MySQLCluster")
	mc.SetNamespace(m.ns)
	mc.SetName(m.name)
	_ = k8s.Patch(context.Background(), mc, client.RawPatch("application/merge-patch+json", []byte(patch)))
}

// ready waits until moco-agent's readiness probe would pass on inst
// (mysqld_health.go MySQLDReady: a writable instance is ready; a
// read-only one when both replication threads run without an error).
func (m *mocoMySQLPods) ready(ctx context.Context, pod string, inst *testenv.MySQLInstance) mysqldRestart {
	r := mysqldRestart{Pod: pod}
	last := ""
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		ro, err := inst.QueryString("SELECT @@GLOBAL.read_only")
		if err != nil {
			last = err.Error()
			continue
		}
		if ro == "0" {
			r.Role = "primary"
			return r
		}
		st, err := inst.ReplicaStatus()
		if err != nil {
			last = err.Error()
			continue
		}
		r.Role, r.IO, r.SQL, r.SourceUser = "replica", st["Replica_IO_Running"], st["Replica_SQL_Running"], st["Source_User"]
		last = fmt.Sprintf("IO %q SQL %q, IO error %q", r.IO, r.SQL, st["Last_IO_Error"])
		if r.IO == "Yes" && r.SQL == "Yes" && st["Last_IO_Errno"] == "0" && st["Last_SQL_Errno"] == "0" {
			r.password, err = inst.QueryString("SELECT User_password FROM mysql.slave_master_info")
			if err != nil {
				r.Err = "connection metadata: " + err.Error()
			}
			r.PasswordLength = len(r.password)
			return r
		}
	}
	r.Err = "not ready: " + last
	return r
}

func (m *mocoMySQLPods) record(r mysqldRestart) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.restarts = append(m.restarts, r)
}

func (m *mocoMySQLPods) snapshot() []mysqldRestart {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mysqldRestart(nil), m.restarts...)
}

// assertReplicasRepointed: every restart since from ended with the pod
// ready, and every restarted replica replicating (both threads Yes) as
// moco-repl with replPassword. It returns the restarts it checked.
func (m *mocoMySQLPods) assertReplicasRepointed(t testing.TB, from int, replPassword string) []mysqldRestart {
	t.Helper()
	rs := m.snapshot()[from:]
	for _, r := range rs {
		t.Logf("mysqld restart: %s", r)
		switch {
		case r.Err != "":
			t.Errorf("restart of %s: %s", r.Pod, r.Err)
		case r.Role == "replica" && (r.IO != "Yes" || r.SQL != "Yes" || r.SourceUser != "moco-repl"):
			t.Errorf("%s did not replicate as MOCO points it after its restart: %s", r.Pod, r)
		case r.Role == "replica" && r.password != replPassword:
			t.Errorf("%s replicates with a password other than moco-repl's in MOCO's user Secret (%d characters)", r.Pod, r.PasswordLength)
		}
	}
	return rs
}

// mocoPrimaryIndex is MOCO's status.currentPrimaryIndex.
func mocoPrimaryIndex(t testing.TB, ns, name string) int {
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("moco.cybozu.com/v1beta2")
	mc.SetKind("MySQLCluster")
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, mc); err != nil {
		return -1
	}
	i, _, _ := unstructured.NestedInt64(mc.Object, "status", "currentPrimaryIndex")
	return int(i)
}

// assertMOCOReplicating: every instance but the primary replicates from it,
// both threads running, as moco-repl with replPassword.
func assertMOCOReplicating(t testing.TB, insts []*testenv.MySQLInstance, primary int, replPassword string) {
	t.Helper()
	eventually(t, 2*time.Minute, "every replica replicates from the primary as moco-repl with its current password", func() (bool, string) {
		for n, i := range insts {
			if n == primary {
				continue
			}
			st, err := i.ReplicaStatus()
			if err != nil {
				return false, err.Error()
			}
			if st["Replica_IO_Running"] != "Yes" || st["Replica_SQL_Running"] != "Yes" || st["Source_User"] != "moco-repl" ||
				st["Source_Port"] != strconv.Itoa(insts[primary].Port) {
				return false, fmt.Sprintf("%s: IO %q SQL %q as %q from port %s", i.Name, st["Replica_IO_Running"], st["Replica_SQL_Running"], st["Source_User"], st["Source_Port"])
			}
			if pw, err := i.QueryString("SELECT User_password FROM mysql.slave_master_info"); err != nil || pw != replPassword {
				return false, fmt.Sprintf("%s: replicates with another password (%v)", i.Name, err)
			}
		}
		return true, ""
	})
}
