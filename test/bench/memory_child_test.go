package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"rekey.io/rekey/internal/controller"
)

// TestMain runs the benchmarks, or, re-executed by BenchmarkManagerMemory,
// one manager whose memory it measures.
func TestMain(m *testing.M) {
	if mode := os.Getenv(memoryChildEnv); mode != "" {
		if err := memoryChild(mode); err != nil {
			fmt.Fprintln(os.Stderr, "memory child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func intstrPort(p int) intstr.IntOrString { return intstr.FromInt32(int32(p)) }

// memoryChild runs the manager as cmd/manager configures it, with the
// workload cache of mode ("old": whole objects, as before issue 18 item 4;
// "lean": CacheByObject's), until its cache holds every Deployment, then
// prints "MEMORY <VmRSS kB> <VmHWM kB>".
func memoryChild(mode string) error {
	ctrl.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0
	want, err := strconv.Atoi(os.Getenv("REKEY_BENCH_WANT"))
	if err != nil {
		return err
	}
	by := controller.CacheByObject()
	if mode == "old" {
		for o := range by {
			if _, ok := o.(*corev1.Secret); !ok {
				delete(by, o)
			}
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Cache:                  cache.Options{ByObject: by},
	})
	if err != nil {
		return err
	}
	r := &controller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("rekey"), Namespace: operatorNamespace, MaxConcurrentReconciles: 4}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var list appsv1.DeploymentList
		if err := mgr.GetCache().List(ctx, &list); err == nil && len(list.Items) == want {
			if mode != "old" && len(list.Items[0].Spec.Template.Spec.Containers) != 0 {
				return fmt.Errorf("the lean cache holds whole pod templates")
			}
			break
		}
		select {
		case err := <-done:
			return fmt.Errorf("manager stopped: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cache never held %d Deployments", want)
		}
	}
	time.Sleep(2 * time.Second)
	runtime.GC()
	debug.FreeOSMemory()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	kb := func(field string) string {
		for _, l := range strings.Split(string(status), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == field+":" {
				return f[1]
			}
		}
		return "0"
	}
	fmt.Printf("MEMORY %s %s\n", kb("VmRSS"), kb("VmHWM"))
	return nil
}
