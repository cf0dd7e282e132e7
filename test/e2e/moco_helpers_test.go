package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"rekey.io/rekey/internal/moco"
	"rekey.io/rekey/internal/testenv"
)

// MOCO's objects for one MySQLCluster, made here as MOCO's controller makes
// them (MOCO v0.36.0: controllers/mysqlcluster_controller.go
// reconcileV1Secret, reconcileUserSecret, reconcileMyCnfSecret;
// pkg/password; the StatefulSet's moco-agent container reads the user
// Secret with envFrom), on MOCO's real CRD. The names and forms are
// written out here rather than taken from internal/moco, so that a
// mistake there cannot agree with itself.

const mocoSystemNS = "moco-system"

// installMOCOCRDs installs MOCO's real CRDs (from its pinned Go module)
// into the API server the test runs on.
func installMOCOCRDs(t testing.TB) {
	t.Helper()
	dir, version, err := env.MOCOCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if version != moco.Version {
		t.Fatalf("hack/env/versions.env pins MOCO %s, rekey follows MOCO %s: keep them equal", version, moco.Version)
	}
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true,
		// envtest's default of 10 s for the CRDs to be served ran out at
		// load 40 on 2 CPUs; this is a hang guard, not a speed check.
		MaxTime: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	t.Logf("MOCO %s CRDs installed from %s", version, dir)
}

type mocoFixture struct {
	ns, name  string
	cluster   *unstructured.Unstructured
	passwords map[string]string // MOCO's key → password
	copies    atomic.Int64      // user Secret updates MOCO's loop made
}

func mocoPassword(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// newMOCOFixture makes the MySQLCluster, its 3 Secrets, its StatefulSet
// (its pods carry app=moco-<name> so the test plays them as consumers),
// and the 8 system users on every instance, as MOCO's init does.
func newMOCOFixture(t *testing.T, ns, name string, c *testenv.MySQLCluster) *mocoFixture {
	t.Helper()
	ctx := ctxT(t)
	f := &mocoFixture{ns: ns, name: name, passwords: map[string]string{}}
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"replicas":    int64(3),
			"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "mysqld", "image": "ghcr.io/cybozu-go/moco/mysql:8.4.5"}}}},
			"volumeClaimTemplates": []any{map[string]any{"metadata": map[string]any{"name": "mysql-data"},
				"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}},
		},
	}}
	if err := k8s.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	f.cluster = mc
	f.setHealthy(t, true)

	users := map[string]string{"ADMIN_PASSWORD": "moco-admin", "AGENT_PASSWORD": "moco-agent", "REPLICATION_PASSWORD": "moco-repl",
		"CLONE_DONOR_PASSWORD": "moco-clone-donor", "EXPORTER_PASSWORD": "moco-exporter", "BACKUP_PASSWORD": "moco-backup",
		"READONLY_PASSWORD": "moco-readonly", "WRITABLE_PASSWORD": "moco-writable"}
	var stmts []string
	for k, u := range users {
		f.passwords[k] = mocoPassword(t)
		stmts = append(stmts, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", u, f.passwords[k]))
	}
	stmts = append(stmts, "GRANT ALL PRIVILEGES ON *.* TO 'moco-admin'@'%' WITH GRANT OPTION")
	onEachInstance(t, c.Instances(), stmts...)

	ctrl := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mocoSystemNS, Name: fmt.Sprintf("mysql-%s.%s", ns, name),
		Labels: map[string]string{"app.kubernetes.io/name": "mysql", "app.kubernetes.io/instance": name,
			"app.kubernetes.io/created-by": "moco", "app.kubernetes.io/instance-namespace": ns},
		Annotations: map[string]string{"moco.cybozu.com/secret-version": "1"}}, Data: map[string][]byte{}}
	for k, v := range f.passwords {
		ctrl.Data[k] = []byte(v)
	}
	if err := k8s.Create(ctx, ctrl); err != nil {
		t.Fatal(err)
	}
	f.copySecrets(t) // creates the two Secrets of the cluster's namespace
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // MOCO's reconcile loop re-applying them
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			f.copySecrets(nil)
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		t.Logf("MOCO's Secret loop updated the user Secret %d times", f.copies.Load())
	})

	labels := map[string]string{"app.kubernetes.io/name": "mysql", "app.kubernetes.io/instance": name,
		"app.kubernetes.io/created-by": "moco", "app": "moco-" + name}
	envFrom := []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "moco-" + name}}}}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco-" + name, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(3)), ServiceName: "moco-" + name,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeName: cp.NodeName, Containers: []corev1.Container{
					{Name: "agent", Image: "ghcr.io/cybozu-go/moco-agent:0.13.0", EnvFrom: envFrom},
					{Name: "mysqld", Image: "ghcr.io/cybozu-go/moco/mysql:8.4.5"},
				}},
			},
		},
	}
	if err := k8s.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	return f
}

// myCnf is one my.cnf entry as MOCO's template writes it ({{printf "%q"}}).
func myCnf(user, password, socket string) string {
	s := fmt.Sprintf("[client]\nuser=%q\npassword=%q\n", user, password)
	if socket != "" {
		s += fmt.Sprintf("socket=%q\n", socket)
	}
	return s
}

func myCnfOf(pw map[string]string) map[string][]byte {
	return map[string][]byte{
		"moco-admin-my.cnf":    []byte(myCnf("moco-admin", pw["ADMIN_PASSWORD"], "")),
		"moco-exporter-my.cnf": []byte(myCnf("moco-exporter", pw["EXPORTER_PASSWORD"], "/run/mysqld.sock")),
		"moco-backup-my.cnf":   []byte(myCnf("moco-backup", pw["BACKUP_PASSWORD"], "")),
		"moco-readonly-my.cnf": []byte(myCnf("moco-readonly", pw["READONLY_PASSWORD"], "")),
		"moco-writable-my.cnf": []byte(myCnf("moco-writable", pw["WRITABLE_PASSWORD"], "")),
	}
}

// copySecrets is MOCO's reconcileUserSecret and reconcileMyCnfSecret:
// both Secrets of the cluster's namespace made from the controller
// Secret, owned by the MySQLCluster. t nil: errors are ignored (a loop).
func (f *mocoFixture) copySecrets(t testing.TB) {
	ctx := context.Background()
	fail := func(err error) {
		if t != nil && err != nil {
			t.Fatal(err)
		}
	}
	ctrl := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: mocoSystemNS, Name: fmt.Sprintf("mysql-%s.%s", f.ns, f.name)}, ctrl); err != nil {
		fail(err)
		return
	}
	pw := map[string]string{}
	for k, v := range ctrl.Data {
		pw[k] = string(v)
	}
	user := map[string][]byte{}
	for _, k := range []string{"ADMIN_PASSWORD", "AGENT_PASSWORD", "REPLICATION_PASSWORD", "CLONE_DONOR_PASSWORD", "EXPORTER_PASSWORD", "BACKUP_PASSWORD", "READONLY_PASSWORD", "WRITABLE_PASSWORD"} {
		user[k] = []byte(pw[k])
	}
	for name, data := range map[string]map[string][]byte{"moco-" + f.name: user, "moco-my-cnf-" + f.name: myCnfOf(pw)} {
		s := &corev1.Secret{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, s)
		if client.IgnoreNotFound(err) != nil {
			fail(err)
			return
		}
		if err != nil {
			s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name,
				Annotations:     map[string]string{"moco.cybozu.com/secret-version": "1"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "moco.cybozu.com/v1beta2", Kind: "MySQLCluster", Name: f.name, UID: f.cluster.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
				Data: data}
			fail(k8s.Create(ctx, s))
			continue
		}
		if sameData(s.Data, data) {
			continue
		}
		s.Data = data
		if err := k8s.Update(ctx, s); err == nil && name == "moco-"+f.name {
			f.copies.Add(1)
		} else {
			fail(err)
		}
	}
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if string(b[k]) != string(v) {
			return false
		}
	}
	return true
}

// setPrimary records a switchover in the status, as MOCO's clustering
// loop does once it has moved the primary.
func (f *mocoFixture) setPrimary(t testing.TB, index int64) {
	t.Helper()
	f.updateStatus(t, func(mc *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(mc.Object, index, "status", "currentPrimaryIndex")
	})
}

// setHealthy sets MOCO's conditions as its clustering loop does for a
// healthy cluster, or Healthy=False as for a degraded one.
func (f *mocoFixture) setHealthy(t testing.TB, healthy bool) {
	t.Helper()
	now := metav1.Now().UTC().Format(time.RFC3339)
	cond := func(typ string, ok bool, why string) any {
		st := "True"
		if !ok {
			st = "False"
		}
		return map[string]any{"type": typ, "status": st, "reason": why, "message": "", "lastTransitionTime": now}
	}
	healthReason := "Healthy"
	if !healthy {
		healthReason = "Degraded"
	}
	f.updateStatus(t, func(mc *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(mc.Object, []any{cond("Initialized", true, "Initialized"), cond("Available", true, "Available"),
			cond("Healthy", healthy, healthReason), cond("StatefulSetReady", true, "Ready"), cond("ReconcileSuccess", true, "ReconcileSuccess"),
			cond("ReconciliationActive", true, "ReconciliationActive"), cond("ClusteringActive", true, "ClusteringActive")}, "status", "conditions")
		if _, ok, _ := unstructured.NestedInt64(mc.Object, "status", "currentPrimaryIndex"); !ok {
			_ = unstructured.SetNestedField(mc.Object, int64(0), "status", "currentPrimaryIndex")
		}
	})
}

// updateStatus changes the MySQLCluster's status from a fresh read, again
// on a conflict.
func (f *mocoFixture) updateStatus(t testing.TB, edit func(*unstructured.Unstructured)) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		mc := &unstructured.Unstructured{}
		mc.SetGroupVersionKind(f.cluster.GroupVersionKind())
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(f.cluster), mc); err != nil {
			t.Fatal(err)
		}
		edit(mc)
		err := k8s.Status().Update(context.Background(), mc)
		if err == nil {
			f.cluster = mc
			return
		}
		if attempt > 5 || !strings.Contains(err.Error(), "modified") {
			t.Fatal(err)
		}
	}
}

// secretsMOCOReads gives, for each Secret MOCO and its pods read, the
// passwords it holds (my.cnf entries parsed).
func (f *mocoFixture) secretsMOCOReads(t testing.TB) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	ctrl := secretData(t, mocoSystemNS, fmt.Sprintf("mysql-%s.%s", f.ns, f.name))
	out["controller"] = userPasswords(ctrl, mocoKeys, "")
	out["user"] = userPasswords(secretData(t, f.ns, "moco-"+f.name), mocoKeys, "")
	cnf := map[string]string{}
	for k, v := range secretData(t, f.ns, "moco-my-cnf-"+f.name) {
		for _, line := range strings.Split(string(v), "\n") {
			if p, ok := strings.CutPrefix(line, "password="); ok {
				cnf[strings.TrimSuffix(k, "-my.cnf")] = strings.Trim(p, `"`)
			}
		}
	}
	out["my.cnf"] = cnf
	return out
}
