// Command manager runs the rekey operator.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/leader"
	"rekey.io/rekey/internal/metrics"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rekey manager:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		namespace, metricsAddr, probeAddr string
		watchNamespaces                   string
		secretNamespaces                  string
		metricsSecure                     bool
		leaderElect                       bool
		leaseDuration, renewDeadline      time.Duration
		retryPeriod                       time.Duration
		concurrency                       int
		workers                           int
		metricsMaxSets, metricsMaxPerNS   int
		resync                            time.Duration
		grace                             time.Duration
		stuckAfter                        time.Duration
	)
	flag.StringVar(&namespace, "namespace", envOr("POD_NAMESPACE", "rekey-system"), "namespace of the source Secrets (the operator's own)")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint (0 disables it)")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers the API server authenticates and authorizes (get on the /metrics non-resource URL); false serves plain HTTP to anyone who can reach the port")
	flag.StringVar(&watchNamespaces, "watch-namespaces", "", "comma-separated namespaces whose CredentialSets and workloads rekey watches (namespaced mode, with Roles instead of ClusterRoles); empty: every namespace")
	flag.StringVar(&secretNamespaces, "secret-namespaces", "", "comma-separated namespaces where rekey watches the Secrets it wrote (to undo hand edits at once); set it where its RBAC grants Secrets only in some namespaces. Empty: every namespace, or --watch-namespaces and --namespace")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the health probes")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader, for running more than one replica; the leader checks it still holds the Lease right before every backend write")
	flag.DurationVar(&leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a leader's Lease lasts without renewal: a replica takes over a leader that stopped after this long")
	flag.DurationVar(&renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading (less than the lease duration)")
	flag.DurationVar(&retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the Lease")
	flag.IntVar(&concurrency, "instance-concurrency", 8, "instances a phase works on at once (1: one after another)")
	flag.IntVar(&workers, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles, "CredentialSets reconciled at once; sets on the same backend server (MySQL instance, Ceph monitors, RabbitMQ endpoint) still go one at a time, so the others keep moving while one waits on a server that does not answer (1: one set at a time, as before)")
	flag.DurationVar(&resync, "resync-period", 5*time.Minute, "how often an idle set is re-checked (restores hand-edited distribution Secrets)")
	flag.DurationVar(&grace, "default-grace-period", 5*time.Minute, "grace period of discardPolicy AfterRollout when the set gives none")
	flag.DurationVar(&stuckAfter, "rotation-stuck-after", time.Hour, "how long a rotation may stay active before the RotationStuck condition, a Warning Event and rekey_rotation_stuck say so, when the set gives no rotation.stuckAfter (0: off)")
	flag.IntVar(&metricsMaxSets, "metrics-max-sets", metrics.DefaultMaxSets, "CredentialSets that get metric series of their own (about twenty each); further ones are counted in rekey_credentialsets_unlisted and their counters summed under namespace and name \"_unlisted\" (0: no bound)")
	flag.IntVar(&metricsMaxPerNS, "metrics-max-sets-per-namespace", metrics.DefaultMaxSetsPerNamespace, "of those, at most this many per namespace, so one namespace cannot take every place (0: no bound)")
	// Each backend's own flags (a program it runs, a namespace another
	// operator keeps its Secrets in), as it registered them.
	settings := registry.BindFlags(flag.CommandLine)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	if workers < 1 {
		return fmt.Errorf("--max-concurrent-reconciles=%d: want 1 or more", workers)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	metrics.SetLimits(metricsMaxSets, metricsMaxPerNS)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1.AddToScheme(scheme); err != nil {
		return err
	}
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr}
	if metricsSecure {
		// A self-signed certificate unless one is mounted; every request
		// is checked with a TokenReview and a SubjectAccessReview.
		metricsOpts.SecureServing = true
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	cacheOpts := cache.Options{}
	secretNS := splitList(secretNamespaces)
	if ns := splitList(watchNamespaces); len(ns) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, n := range ns {
			cacheOpts.DefaultNamespaces[n] = cache.Config{}
		}
		if len(secretNS) == 0 {
			secretNS = append(ns, namespace)
		}
	}
	cacheOpts.ByObject = controller.CacheByObject(secretNS...)
	cfg := ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: namespace,
		// A stopping leader releases its Lease, so a new one takes over at
		// once rather than after the lease duration; safe because run
		// returns, and the process exits, as soon as the manager stops.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
		// nil (the manager's own) except in the end-to-end tests' build.
		LeaderElectionConfig: testLeaderConfig(cfg),
		// Secrets are always read live; the cache holds only the ones
		// rekey wrote, for the watch that restores hand edits.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return err
	}
	r := &controller.Reconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorder("rekey"),
		Namespace:               namespace,
		DefaultGracePeriod:      grace,
		DefaultStuckAfter:       stuckAfter,
		InstanceConcurrency:     concurrency,
		MaxConcurrentReconciles: workers,
		ResyncPeriod:            resync,
		Settings:                settings(),
	}
	if unfenced := testUnfenced(); leaderElect && unfenced != "1" {
		// Only the end-to-end tests' build can switch the fence off, to
		// show what it prevents (unfenced_rekeytest.go): "1" turns it
		// off, "lease" keeps only what the backends check themselves.
		fence := leader.NewFence(mgr.GetAPIReader(), namespace, leaderElectionID)
		r.Fence = fence
		if unfenced == "lease" {
			r.Fence = termOnly{fence}
		}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			select {
			case <-mgr.Elected():
			case <-ctx.Done():
				return nil
			}
			return fence.Elected(ctx)
		})); err != nil {
			return err
		}
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// leaderElectionID names the Lease the replicas elect a leader with.
const leaderElectionID = "rekey.io"

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// termOnly is a Fence that never asks the Lease: what is left is what a
// backend checks itself with the term (testUnfenced "lease").
type termOnly struct{ *leader.Fence }

func (termOnly) Check(context.Context) error { return nil }
