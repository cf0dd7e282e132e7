package demo

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/testenv"
)

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1.AddToScheme(s)
	return s
}

func newClient(cp *testenv.ControlPlane) (client.Client, error) {
	return client.New(cp.Config, client.Options{Scheme: scheme()})
}

// startManager runs the operator in this process, logging to a file.
func startManager(ctx context.Context, cp *testenv.ControlPlane) (stop func(), logPath string, err error) {
	logPath = filepath.Join(cp.Dir, "rekey-manager.log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(f)))
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: controller.CacheByObject()},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return nil, "", err
	}
	r := &controller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("rekey"), Namespace: "rekey-system", DefaultGracePeriod: 5 * time.Second}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, "", err
	}
	mctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(mctx) }()
	return func() { cancel(); wg.Wait(); f.Close() }, logPath, nil
}
