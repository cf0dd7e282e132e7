package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkManagerMemory is the manager's resident memory with many
// workloads in the cluster (issue 18 item 4): 100, then 10,000
// Deployments (plain objects; nothing runs them), each with a realistic
// pod template (two containers, env, probes, resources, volumes), created
// by a client as kubectl create would (so with managedFields). For each
// count, a manager configured as cmd/manager runs in a process of its own
// (this test binary, re-executed: memoryChild) with the cache before issue
// 18 item 4 (whole workloads) and the lean one (trimWorkload), alternating;
// each reports its VmRSS once its cache holds every Deployment and after a
// GC, and its VmHWM (the peak, reached while the first list is decoded).
func BenchmarkManagerMemory(b *testing.B) {
	cp, k8s := apiServer(b)
	ns := "memory"
	createNamespace(b, k8s, ns)
	have := 0
	for _, n := range []int{100, 10000} {
		createDeployments(b, k8s, ns, have, n)
		have = n
		b.Run(fmt.Sprintf("deployments=%d", n), func(b *testing.B) {
			var rss, hwm [2]float64
			for range b.N {
				for k, mode := range []string{"old", "lean"} {
					r, h := runMemoryChild(b, cp.Kubeconfig, mode, n)
					rss[k] += r
					hwm[k] += h
				}
			}
			N := float64(b.N)
			b.ReportMetric(rss[0]/N, "old-rss-MiB")
			b.ReportMetric(rss[1]/N, "lean-rss-MiB")
			b.ReportMetric(rss[1]/rss[0], "lean/old-rss")
			b.ReportMetric(hwm[0]/N, "old-peak-MiB")
			b.ReportMetric(hwm[1]/N, "lean-peak-MiB")
		})
	}
}

// createDeployments creates Deployments from..to-1, 16 requests at once.
func createDeployments(b *testing.B, k8s client.Client, ns string, from, to int) {
	b.Helper()
	var g errgroup.Group
	g.SetLimit(16)
	for i := from; i < to; i++ {
		g.Go(func() error { return k8s.Create(context.Background(), deployment(ns, i)) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

func deployment(ns string, i int) *appsv1.Deployment {
	name := fmt.Sprintf("app-%05d", i)
	lbl := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop", "tier": "backend"}
	container := func(n, image string) corev1.Container {
		return corev1.Container{
			Name: n, Image: image, Args: []string{"--config=/etc/app/config.yaml", "--log-level=info", "--listen=:8080"},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
			Env: []corev1.EnvVar{
				{Name: "DB_HOST", Value: "mysql.db.svc.cluster.local"}, {Name: "DB_NAME", Value: "shop"},
				{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: name + "-db"}, Key: "password"}}},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstrPort(8080)}}, PeriodSeconds: 5},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez", Port: intstrPort(8080)}}, PeriodSeconds: 10},
			VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "tmp", MountPath: "/tmp"}},
		}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl, Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{container("app", "registry.example.com/shop/app:1.42.0"), container("sidecar", "registry.example.com/shop/proxy:2.3.1")},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"}}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
}

// runMemoryChild runs one manager in a process of its own and returns its
// VmRSS and VmHWM in MiB.
func runMemoryChild(b *testing.B, kubeconfig, mode string, want int) (rss, hwm float64) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memoryChildEnv+"="+mode, "KUBECONFIG="+kubeconfig, "REKEY_BENCH_WANT="+strconv.Itoa(want))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("memory child (%s cache): %v\n%s", mode, err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "MEMORY" {
			r, _ := strconv.ParseFloat(f[1], 64)
			h, _ := strconv.ParseFloat(f[2], 64)
			return r / 1024, h / 1024
		}
	}
	b.Fatalf("memory child (%s cache) reported nothing:\n%s", mode, out)
	return 0, 0
}

const memoryChildEnv = "REKEY_BENCH_MEMORY_CHILD"
