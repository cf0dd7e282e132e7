// Package deployed runs the manager's image as the Helm chart deploys it —
// with runc, as a kubelet's runtime would — against a real API server and
// real MySQL, Ceph and RabbitMQ servers, with nothing but the chart's RBAC.
package deployed

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/engine"
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
	ctx := context.Background()

	// The chart, rendered with helm as `helm install` would (the probe and
	// metrics ports moved off their defaults: the container shares the
	// host's network with other tests).
	ports, err := testenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	metricsPort, healthPort := ports[0], ports[1]
	rendered := runHelm(t, e, helm, "template", "rekey", "charts/rekey", "--namespace", releaseNamespace,
		"--set", "metrics.port="+strconv.Itoa(metricsPort), "--set", "healthProbePort="+strconv.Itoa(healthPort))
	for _, n := range []string{releaseNamespace, appNamespace} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	var dep *appsv1.Deployment
	var rbac []string
	roles := map[string][]rbacv1.PolicyRule{} // kind/namespace/name → rules
	var bindings []rbacv1.RoleBinding         // ClusterRoleBindings with an empty namespace
	for _, o := range decodeAll(t, rendered) {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		switch o.GetKind() {
		case "Deployment":
			dep = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, dep); err != nil {
				t.Fatal(err)
			}
		case "RoleBinding", "ClusterRoleBinding":
			b := rbacv1.RoleBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				t.Fatal(err)
			}
			bindings = append(bindings, b)
		case "Role", "ClusterRole":
			r := rbacv1.Role{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			roles[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = r.Rules
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				b, _ := yaml.Marshal(r)
				rbac = append(rbac, fmt.Sprintf("%s %s: %s", o.GetKind(), o.GetName(), strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " ")))
			}
		}
	}
	if dep == nil {
		t.Fatal("the chart renders no Deployment")
	}
	t.Logf("the chart's RBAC, applied as rendered:\n  %s", strings.Join(rbac, "\n  "))

	// The pod the Deployment's ReplicaSet would create (nothing schedules
	// it here: this test plays its kubelet), so the token is bound to it.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, GenerateName: dep.Name + "-", Labels: dep.Spec.Template.Labels},
		Spec:       *dep.Spec.Template.Spec.DeepCopy(),
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("the chart's pod has %d containers, this test runs one", len(pod.Spec.Containers))
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(3607)), // the kubelet's projected token default
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	kube := cp.Clientset()
	if tr, err = kube.CoreV1().ServiceAccounts(releaseNamespace).CreateToken(ctx, pod.Spec.ServiceAccountName, tr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("TokenRequest for ServiceAccount %s: %v", pod.Spec.ServiceAccountName, err)
	}

	// The bundle: the image's layers, the kubelet's files, config.json.
	run := &podRun{pod: pod, container: pod.Spec.Containers[0], bundle: filepath.Join(work, "bundle"),
		podDir: filepath.Join(work, "pod"), state: filepath.Join(work, "runc"),
		id: fmt.Sprintf("rekey-deployed-%d", os.Getpid()), log: filepath.Join(work, "container.log")}
	run.saDir = filepath.Join(run.podDir, "serviceaccount")
	for _, d := range []string{filepath.Join(run.bundle, "rootfs"), run.saDir, run.state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if run.image, _, err = unpackImage(archive, filepath.Join(run.bundle, "rootfs")); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(archive)
	t.Logf("image: archive %.1f MB, root filesystem %.0f MB; entrypoint %v, user %s", float64(fi.Size())/1e6,
		float64(dirSize(t, filepath.Join(run.bundle, "rootfs")))/1e6, run.image.Entrypoint, run.image.User)
	for name, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": cp.Config.CAData, "namespace": []byte(releaseNamespace)} {
		if err := os.WriteFile(filepath.Join(run.saDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	psc := pod.Spec.SecurityContext
	if psc == nil || psc.RunAsUser == nil || psc.RunAsGroup == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || *psc.RunAsUser == 0 {
		t.Fatalf("the chart's pod securityContext %+v: want a non-root runAsUser and runAsGroup", psc)
	}
	run.uid, run.gid = *psc.RunAsUser, *psc.RunAsGroup
	api, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	apiPort, _ := strconv.Atoi(api.Port())
	if err := run.resolveEnv(api.Hostname(), apiPort); err != nil {
		t.Fatal(err)
	}
	if err := run.writeConfig(); err != nil {
		t.Fatal(err)
	}
	t.Logf("container: %s as %d:%d", strings.Join(run.args, " "), run.uid, run.gid)
	if err := run.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		how, err := run.stop()
		t.Logf("container %s", how)
		if err != nil {
			t.Error(err)
		}
		logText, _ := os.ReadFile(run.log)
		if t.Failed() {
			t.Logf("container log:\n%s", tail(string(logText), 60))
		}
	})

	// The kubelet's readiness probe: GET /readyz on the health port.
	probe := fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)
	waitFor(t, run, 2*time.Minute, "readiness probe "+probe, func() (bool, string) {
		resp, err := http.Get(probe)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	t.Logf("container ready %s after start", time.Since(started).Round(time.Second))

	// The three sets, created by their author (here the admin) in apps.
	secret := func(ns, name string, data map[string]string) {
		t.Helper()
		if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}); err != nil {
			t.Fatal(err)
		}
	}

	// MySQL: one application user through an admin rekey never rotates.
	inst := my.Primary
	if err := inst.Exec("CREATE USER 'ops-admin'@'%' IDENTIFIED BY 'ops-admin-password-for-tests'",
		"GRANT ALL PRIVILEGES ON *.* TO 'ops-admin'@'%' WITH GRANT OPTION"); err != nil {
		t.Fatal(err)
	}
	mysqlCA, err := testenv.MySQLCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	secret(appNamespace, "ops-admin", map[string]string{"password": "ops-admin-password-for-tests"})
	secret(appNamespace, "mysql-ca", map[string]string{"ca.crt": string(mysqlCA)})
	sets := []*v1.CredentialSet{{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "app"},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances:      v1.MySQLInstances{Hosts: my.Addrs()},
				Admin:          v1.MySQLAdmin{User: "ops-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "ops-admin", Key: "password"}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "mysql-ca", Key: "ca.crt"},
				Users:          []v1.MySQLUser{{Name: "app"}},
			},
			Distribution: []v1.SecretTarget{{Namespace: appNamespace, Name: "app-db"}},
		},
	}}

	// Ceph: a daemon-style key rotated in place, rekey acting as its own
	// admin entity (not client.admin, which the harness keeps).
	out, err := cph.CLI(ctx, "auth", "get-or-create", "client.rekey-admin", "mon", "allow *", "osd", "allow *", "mds", "allow *", "mgr", "allow *")
	if err != nil {
		t.Fatal(err)
	}
	adminKR, err := ceph.ParseKeyring(string(out))
	if err != nil {
		t.Fatal(err)
	}
	secret(appNamespace, "ceph-admin", map[string]string{"keyring": adminKR.String()})
	sets = append(sets, &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "rgw"},
		Spec: v1.CredentialSetSpec{
			Ceph: &v1.CephSpec{
				Monitors: []string{cph.MonAddr},
				Admin:    v1.CephAdmin{Entity: "client.rekey-admin", KeyringSecretRef: v1.SecretKeyRef{Name: "ceph-admin", Key: "keyring"}},
				Strategy: v1.CephInPlace,
				Entities: []v1.CephEntity{{Name: "client.rgw.a", Caps: v1.CephCaps{Mon: "allow rw", OSD: "allow rwx"}}},
			},
			Distribution: []v1.SecretTarget{{Namespace: appNamespace, Name: "rgw-keys"}},
		},
	})

	// RabbitMQ: a user per generation, over https verified with the CA.
	secret(appNamespace, "rabbit-admin", map[string]string{"username": rmq.AdminUser, "password": rmq.AdminPassword})
	secret(appNamespace, "rabbit-ca", map[string]string{"ca.crt": string(rmq.CAPEM)})
	sets = append(sets, &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "nova"},
		Spec: v1.CredentialSetSpec{
			RabbitMQ: &v1.RabbitMQSpec{
				Endpoint: rmq.MgmtURL,
				TLS:      &v1.RabbitMQTLS{CASecretRef: &v1.SecretKeyRef{Name: "rabbit-ca", Key: "ca.crt"}},
				Admin:    v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "rabbit-admin"}},
				User: v1.RabbitMQUser{Base: "nova",
					Permissions: []v1.RabbitMQPermission{{Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"}}},
				TransportURL: &v1.RabbitMQTransportURL{Hosts: []string{rmq.AMQPAddr()}},
			},
			Distribution: []v1.SecretTarget{{Namespace: appNamespace, Name: "nova-transport"}},
		},
	})
	for _, cs := range sets {
		if err := k8s.Create(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	for _, cs := range sets {
		waitPhase(t, run, k8s, cs.Name, v1.PhaseIdle, 1)
	}
	before := map[string]map[string][]byte{}
	for _, s := range []string{"app-db", "rgw-keys", "nova-transport"} {
		before[s] = secretData(t, k8s, appNamespace, s)
	}
	if len(before["app-db"]["APP_PASSWORD"]) == 0 || len(before["nova-transport"]["password"]) == 0 {
		t.Fatal("app-db or nova-transport holds no credential after provisioning")
	}
	oldCeph, err := cph.Key(ctx, "client.rgw.a")
	if err != nil {
		t.Fatal(err)
	}
	if string(before["rgw-keys"]["client.rgw.a.key"]) != oldCeph {
		t.Fatal("the distribution Secret does not hold the mon's key of client.rgw.a")
	}

	// One rotation each, requested as kubectl rekey rotate does, then
	// (discardPolicy Manual) the discard, as kubectl rekey discard does.
	annotate := func(name, key string) {
		t.Helper()
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"r1"}}}`, key))
		if err := k8s.Patch(ctx, &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: name}},
			client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	rotateStart := time.Now()
	for _, cs := range sets {
		annotate(cs.Name, engine.RotateAnnotation)
	}
	for _, cs := range sets {
		waitPhase(t, run, k8s, cs.Name, v1.PhaseDistributed, 1)
	}
	after := map[string]map[string][]byte{}
	for _, s := range []string{"app-db", "rgw-keys", "nova-transport"} {
		after[s] = secretData(t, k8s, appNamespace, s)
	}
	// Before the discard, old and new both work on MySQL and RabbitMQ (no
	// lockout); an in-place Ceph key has no overlap by design.
	if err := inst.CanLogin("app", string(before["app-db"]["APP_PASSWORD"])); err != nil {
		t.Fatalf("MySQL refuses app's old password before the discard: %v", err)
	}
	if err := inst.CanLogin("app", string(after["app-db"]["APP_PASSWORD"])); err != nil {
		t.Fatalf("MySQL refuses app's new password before the discard: %v", err)
	}
	if err := rmq.CanAuthenticate(string(before["nova-transport"]["username"]), string(before["nova-transport"]["password"])); err != nil {
		t.Fatalf("RabbitMQ refuses the old user before the discard: %v", err)
	}
	for _, cs := range sets {
		annotate(cs.Name, engine.DiscardAnnotation)
	}
	for _, cs := range sets {
		waitPhase(t, run, k8s, cs.Name, v1.PhaseIdle, 2)
	}
	t.Logf("three rotations, rotate to discard, complete in %s", time.Since(rotateStart).Round(time.Second))
	for _, s := range []string{"app-db", "rgw-keys", "nova-transport"} {
		if now := secretData(t, k8s, appNamespace, s); !reflect.DeepEqual(now, after[s]) {
			t.Fatalf("%s changed at the discard", s)
		}
	}

	// MySQL: the new password logs in, the old one no longer does.
	oldPw, newPw := string(before["app-db"]["APP_PASSWORD"]), string(after["app-db"]["APP_PASSWORD"])
	if newPw == "" || newPw == oldPw {
		t.Fatal("app-db holds no new password after the rotation")
	}
	if err := inst.CanLogin("app", newPw); err != nil {
		t.Fatalf("MySQL refuses app's new password: %v", err)
	}
	if inst.CanLogin("app", oldPw) == nil {
		t.Fatal("MySQL still accepts app's old password after the discard")
	}

	// Ceph: the Secret holds what the mon holds; the old key is refused.
	newCeph, err := cph.Key(ctx, "client.rgw.a")
	if err != nil {
		t.Fatal(err)
	}
	if newCeph == oldCeph || string(after["rgw-keys"]["client.rgw.a.key"]) != newCeph {
		t.Fatal("rgw-keys does not hold client.rgw.a's new key from the mon")
	}
	if !cephAuthenticates(t, cph, "client.rgw.a", newCeph) {
		t.Fatal("client.rgw.a's new key does not authenticate")
	}
	if cephAuthenticates(t, cph, "client.rgw.a", oldCeph) {
		t.Fatal("client.rgw.a's old key still authenticates after an in-place rotation")
	}

	// RabbitMQ: the new generation's user logs in over AMQP, the old
	// generation's user is gone.
	oldU, oldP := string(before["nova-transport"]["username"]), string(before["nova-transport"]["password"])
	newU, newP := string(after["nova-transport"]["username"]), string(after["nova-transport"]["password"])
	if newU == "" || newU == oldU {
		t.Fatalf("nova-transport names user %q after the rotation, %q before", newU, oldU)
	}
	if err := rmq.CanAuthenticate(newU, newP); err != nil {
		t.Fatalf("RabbitMQ refuses %s with the distributed password: %v", newU, err)
	}
	waitFor(t, run, time.Minute, "the old RabbitMQ user "+oldU+" retired", func() (bool, string) {
		err := rmq.CanAuthenticate(oldU, oldP)
		return err != nil, fmt.Sprint(err)
	})
	t.Logf("MySQL app, Ceph client.rgw.a, RabbitMQ %s → %s: each new credential works on its server, each old one is refused", oldU, newU)

	// The image's probes still answer, and the log shows no request the
	// API server refused, and no credential.
	// The secure metrics endpoint, scraped as Prometheus would with a
	// token bound to the chart's metrics-reader role: the manager checks it
	// with a TokenReview and a SubjectAccessReview.
	scrape := fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort)
	if code, _ := get(scrape, ""); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Fatalf("metrics without a token: HTTP %d, want 401 or 403", code)
	}
	scraper := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: "prometheus"}}
	if err := k8s.Create(ctx, scraper); err != nil {
		t.Fatal(err)
	}
	reader := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-rekey-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: dep.Name + "-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: releaseNamespace, Name: "prometheus"}}}
	if err := k8s.Create(ctx, reader); err != nil {
		t.Fatal(err)
	}
	st, err := kube.CoreV1().ServiceAccounts(releaseNamespace).CreateToken(ctx, "prometheus", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var body string
	waitFor(t, run, 30*time.Second, "an authorized scrape of "+scrape, func() (bool, string) {
		var code int
		code, body = get(scrape, st.Status.Token)
		return code == http.StatusOK, fmt.Sprintf("HTTP %d", code)
	})
	if !strings.Contains(body, "rekey_rotations_total") {
		t.Fatalf("the metrics hold no rekey_rotations_total:\n%s", tail(body, 20))
	}

	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", healthPort, p))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("probe %s: %v %v", p, err, resp)
		}
		resp.Body.Close()
	}
	logText, err := os.ReadFile(run.log)
	if err != nil {
		t.Fatal(err)
	}
	var denied []string
	for _, line := range strings.Split(string(logText), "\n") {
		if l := strings.ToLower(line); strings.Contains(l, "forbidden") || strings.Contains(l, "cannot get") ||
			strings.Contains(l, "cannot list") || strings.Contains(l, "cannot watch") || strings.Contains(l, "cannot create") ||
			strings.Contains(l, "cannot patch") || strings.Contains(l, "cannot update") {
			denied = append(denied, line)
		}
	}
	if len(denied) > 0 {
		t.Errorf("the manager logged %d refusal(s) by the API server with the chart's RBAC:\n%s", len(denied), strings.Join(denied, "\n"))
	}
	// The audit log: every request the chart's ServiceAccount made; none
	// may have been refused. Rules no request needed are review notes.
	user := "system:serviceaccount:" + releaseNamespace + ":" + pod.Spec.ServiceAccountName
	used, refused, err := auditAccesses(auditLog, user)
	if err != nil {
		t.Fatal(err)
	}
	if len(used) == 0 {
		t.Fatalf("the audit log %s has no request of %s", auditLog, user)
	}
	if len(refused) > 0 {
		t.Errorf("the API server refused %d request(s) of %s with the chart's RBAC:\n%s", len(refused), user, strings.Join(refused, "\n"))
	}
	t.Logf("requests of %s: %s", user, describeUsed(used))
	var unused []string
	for _, b := range bindings {
		bound := false
		for _, s := range b.Subjects {
			bound = bound || (s.Kind == "ServiceAccount" && s.Namespace == releaseNamespace && s.Name == pod.Spec.ServiceAccountName)
		}
		if !bound {
			continue
		}
		key := b.RoleRef.Kind + "/" + b.Namespace + "/" + b.RoleRef.Name
		if b.RoleRef.Kind == "ClusterRole" {
			key = "ClusterRole//" + b.RoleRef.Name
		}
		unused = append(unused, unusedRules(strings.TrimPrefix(strings.ReplaceAll(key, "//", "/"), "/"), roles[key], used)...)
	}
	if len(unused) > 0 {
		t.Logf("review notes, granted to the manager but used by no request in this run (consumers, cross-namespace consent and Event aggregation are not exercised here; informers list through streamed watches, list is their fallback):\n  %s", strings.Join(unused, "\n  "))
	}
	secrets := map[string]string{"old MySQL password": oldPw, "new MySQL password": newPw, "old Ceph key": oldCeph,
		"new Ceph key": newCeph, "old RabbitMQ password": oldP, "new RabbitMQ password": newP,
		"ServiceAccount token": tr.Status.Token, "Ceph admin key": adminKR.Key}
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

// get fetches url as a scraper would (the manager's certificate is
// self-signed, as the chart's monitor assumes), with a bearer token if given.
func get(url, token string) (int, string) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func runHelm(t *testing.T, e *testenv.Env, helm string, args ...string) []byte {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helm, args...)
	cmd.Dir = e.RepoRoot
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

func decodeAll(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("helm template output: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

func secretData(t *testing.T, k8s client.Client, ns, name string) map[string][]byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s.Data
}

// waitPhase waits until the set is in phase at generation gen.
func waitPhase(t *testing.T, run *podRun, k8s client.Client, name string, phase v1.RotationPhase, gen int64) {
	t.Helper()
	waitFor(t, run, 3*time.Minute, fmt.Sprintf("%s %s at generation %d", name, phase, gen), func() (bool, string) {
		cs := &v1.CredentialSet{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: appNamespace, Name: name}, cs); err != nil {
			return false, err.Error()
		}
		var conds []string
		for _, c := range cs.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
		}
		return cs.Status.Phase == phase && cs.Status.KeyGeneration == gen,
			fmt.Sprintf("phase %q generation %d %s", cs.Status.Phase, cs.Status.KeyGeneration, strings.Join(conds, " "))
	})
}

// waitFor polls cond every 250 ms; the container ending early fails at once.
func waitFor(t *testing.T, run *podRun, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		if state != "" {
			last = state
		}
		if gone, err := run.exited(); gone {
			logText, _ := os.ReadFile(run.log)
			t.Fatalf("the container exited (%v) while waiting for %s (last: %s); its log:\n%s", err, what, last, tail(string(logText), 40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// cephAuthenticates reports whether the mon accepts key for entity.
func cephAuthenticates(t *testing.T, c *testenv.Ceph, entity, key string) bool {
	t.Helper()
	ok, err := c.Authenticates(context.Background(), entity, key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// envtest logs through controller-runtime's logger; nothing here reads it.
func init() { ctrllog.SetLogger(logr.Discard()) }
