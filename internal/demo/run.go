// Package demo is `make demo`: the main job end to end on an embedded local
// environment — a real control plane where a Deployment really rolls out, a
// real 3-instance MySQL cluster, the operator, and a client load that must
// never fail a login while `kubectl rekey` rotates and discards.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

const (
	namespace = "demo"
	setName   = "demo"
	secret    = "mysql-credentials"
)

// Run runs the demo; plugin is the kubectl-rekey binary.
func Run(ctx context.Context, out io.Writer, plugin string) error {
	say := func(f string, a ...any) { fmt.Fprintf(out, "==> "+f+"\n", a...) }
	env, err := testenv.Load()
	if err != nil {
		return err
	}
	say("starting the control plane: kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok")
	cp, err := env.StartFullControlPlane(testenv.ControlPlaneOptions{CRDDirectoryPaths: []string{"config/crd/bases"}})
	if err != nil {
		return err
	}
	defer cp.Stop()
	say("kube-apiserver %s; CRD credentialsets.rekey.io installed", cp.Version)
	say("starting MySQL: a primary and two replicas with GTID replication")
	cluster, err := env.StartMySQLCluster(testenv.MySQLOptions{})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	v, _ := env.MySQLVersion()
	say("mysqld %s on %v", v, cluster.Addrs())

	k8s, err := newClient(cp)
	if err != nil {
		return err
	}
	stopManager, logPath, err := startManager(ctx, cp)
	if err != nil {
		return err
	}
	defer stopManager()
	say("operator running (log: %s)", logPath)

	if err := setUp(ctx, k8s, cluster, cp.NodeName); err != nil {
		return err
	}
	say("CredentialSet %s/%s: the moco preset's 8 users and the application user \"app\"", namespace, setName)
	if _, err := waitSet(ctx, k8s, func(cs *v1.CredentialSet) bool { return cs.Status.KeyGeneration == 1 }); err != nil {
		return err
	}
	if err := waitAvailable(ctx, k8s); err != nil {
		return err
	}
	say("generation 1 provisioned; Deployment app (3 pods) reads %s", secret)

	tr := &tracker{k8s: k8s}
	go tr.run(ctx)
	l := &load{k8s: k8s, namespace: namespace, selector: map[string]string{"app": "demo"}, secret: secret,
		user: "app", key: "APP_PASSWORD", instances: cluster.Instances(), phase: tr.phase, rate: 100 * time.Millisecond}
	lctx, stopLoad := context.WithCancel(ctx)
	var lwg sync.WaitGroup
	lwg.Add(1)
	go func() { defer lwg.Done(); l.run(lctx) }()
	say("client load: every pod logs in 10 times a second, round-robin over the 3 instances")
	sleep(ctx, 3*time.Second)

	kubeconfig := cp.Kubeconfig
	say("kubectl rekey rotate %s --wait", setName)
	if err := runPlugin(ctx, out, plugin, kubeconfig, "rotate", setName, "-n", namespace, "--wait"); err != nil {
		stopLoad()
		return err
	}
	say("kubectl rekey discard %s --wait   (waits for the Deployment to roll out first)", setName)
	if err := runPlugin(ctx, out, plugin, kubeconfig, "discard", setName, "-n", namespace, "--wait"); err != nil {
		stopLoad()
		return err
	}
	sleep(ctx, 3*time.Second)
	stopLoad()
	lwg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	_ = runPlugin(ctx, out, plugin, kubeconfig, "status", "-n", namespace)

	cs := &v1.CredentialSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: setName}, cs); err != nil {
		return err
	}
	rows, failed := l.summary()
	fmt.Fprintf(out, "\n%-12s %8s %8s\n", "phase", "logins", "failed")
	for _, r := range rows {
		fmt.Fprintln(out, r)
	}
	for _, d := range tr.durations() {
		fmt.Fprintln(out, d)
	}
	fmt.Fprintf(out, "final generation: %d\n", cs.Status.KeyGeneration)
	if failed > 0 {
		return fmt.Errorf("%d logins failed: a consumer was locked out", failed)
	}
	if cs.Status.KeyGeneration != 2 {
		return fmt.Errorf("generation %d after one rotation, want 2", cs.Status.KeyGeneration)
	}
	fmt.Fprintln(out, "no login failed: rotation without downtime")
	return nil
}

func runPlugin(ctx context.Context, out io.Writer, plugin, kubeconfig string, args ...string) error {
	cmd := exec.CommandContext(ctx, plugin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl rekey %s: %w", args[0], err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// setUp creates what a platform team would have before rekey: the MySQL
// admin account, the application's Deployment, and the CredentialSet.
func setUp(ctx context.Context, k8s client.Client, c *testenv.MySQLCluster, node string) error {
	adminPw, err := engine.NewPassword()
	if err != nil {
		return err
	}
	for _, i := range c.Instances() {
		stmts := []string{"SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF",
			fmt.Sprintf("CREATE USER 'moco-admin'@'%%' IDENTIFIED BY '%s'", adminPw),
			"GRANT ALL PRIVILEGES ON *.* TO 'moco-admin'@'%' WITH GRANT OPTION"}
		if i.Role != testenv.RolePrimary {
			stmts = append(stmts, "SET GLOBAL super_read_only=ON")
		}
		if err := i.Exec(stmts...); err != nil {
			return err
		}
	}
	for _, ns := range []string{"rekey-system", namespace} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	// The CA that signed the instances' certificates: rekey verifies TLS
	// by default, as it would against MOCO's or cert-manager's CA.
	ca, err := testenv.MySQLCAPEM()
	if err != nil {
		return err
	}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "moco-bootstrap"},
			StringData: map[string]string{"ADMIN_PASSWORD": adminPw}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "mysql-ca"},
			StringData: map[string]string{"ca.crt": string(ca)}},
		deployment(node),
		&v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: setName},
			Spec: v1.CredentialSetSpec{
				MySQL: &v1.MySQLSpec{
					Instances:      v1.MySQLInstances{Hosts: c.Addrs()},
					Admin:          v1.MySQLAdmin{User: "moco-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "moco-bootstrap", Key: "ADMIN_PASSWORD"}},
					TLSCASecretRef: &v1.SecretKeyRef{Name: "mysql-ca", Key: "ca.crt"},
					Preset:         "moco",
					Users:          []v1.MySQLUser{{Name: "app", Grants: []v1.MySQLGrant{{Privileges: []string{"SELECT"}, Object: "mysql.*"}}}},
				},
				Distribution: []v1.SecretTarget{{Namespace: namespace, Name: secret}},
				Consumers:    []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "app"}},
			},
		},
	}
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func deployment(node string) *appsv1.Deployment {
	labels := map[string]string{"app": "demo"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "app"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				// Pods take 2 s to become ready, so the rollout is visible.
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{testenv.ReadyDelayAnnotation: "2s"}},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
					Name: "app", Image: "app:1",
					EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}},
				}}},
			},
		},
	}
}

func waitAvailable(ctx context.Context, k8s client.Client) error {
	for ctx.Err() == nil {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "app"}, d); err == nil && engine.DeploymentRollout(d).Done {
			return nil
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return ctx.Err()
}

func waitSet(ctx context.Context, k8s client.Client, ok func(*v1.CredentialSet) bool) (*v1.CredentialSet, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		cs := &v1.CredentialSet{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: setName}, cs); err == nil && ok(cs) {
			return cs, nil
		}
		sleep(ctx, 200*time.Millisecond)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("CredentialSet %s/%s did not reach the expected state in time", namespace, setName)
}
