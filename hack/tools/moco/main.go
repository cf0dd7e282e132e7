// Command moco-harness runs MOCO's own controller code (the module
// github.com/cybozu-go/moco at the version this module pins) against an
// API server, for rekey's MOCO end-to-end test: MOCO's MySQLCluster
// reconciler, its StatefulSet partition controller and its admission
// webhooks (StatefulSet partition, MySQLCluster defaulting and
// validation), wired as MOCO's moco-controller wires them. MOCO's
// clustering loop is played (clustering.go, process.go, mysqld.go): it
// talks to moco-agent over gRPC and to mysqld, and MOCO v0.36 refuses the
// MySQL 9.x the tests run; the played loop decides with MOCO's own
// DecideState and acts through MOCO's dbop operators where they work on
// MySQL 9. `moco-harness check-secrets` reads a cluster's Secrets with
// MOCO's password code (check.go).
//
// It is a module of its own because MOCO's controller-runtime and
// Kubernetes libraries are older than rekey's: in one build the newer
// would win and MOCO would not be the code MOCO ships.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	mocov1beta2 "github.com/cybozu-go/moco/api/v1beta2"
	"github.com/cybozu-go/moco/controllers"
	"github.com/cybozu-go/moco/pkg/metrics"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	k8smetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "check-secrets" {
		if err := checkSecrets(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "moco-harness check-secrets:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "moco-harness:", err)
		os.Exit(1)
	}
}

func run() error {
	systemNS := flag.String("system-namespace", "moco-system", "MOCO's own namespace (its controller Secrets)")
	port := flag.Int("webhook-port", 0, "loopback port of the admission webhooks")
	certDir := flag.String("cert-dir", "", "folder for the webhook's serving certificate; ca.crt is written there for the webhook configuration")
	interval := flag.Duration("partition-update-interval", 0, "MOCO's --partition-update-interval (its default: 0, no minimum)")
	agentImage := flag.String("agent-image", "ghcr.io/cybozu-go/moco-agent:0.16.0", "MOCO's --agent-image")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseDevMode(true)))

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(mocov1beta2.AddToScheme(scheme))
	// --kubeconfig is controller-runtime's own flag.
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	if err := writeServingCert(*certDir); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: "127.0.0.1", Port: *port, CertDir: *certDir,
		}),
	})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	clusters := newPlayedClustering(mgr.GetClient(), mgr.GetAPIReader(), ctrl.Log.WithName("played-clustering"))

	// As moco-controller's run.go wires them.
	if err := (&controllers.MySQLClusterReconciler{
		Client:                     mgr.GetClient(),
		Scheme:                     mgr.GetScheme(),
		Recorder:                   mgr.GetEventRecorderFor("moco-controller"),
		AgentImage:                 *agentImage,
		BackupImage:                "ghcr.io/cybozu-go/moco-backup:0.36.0",
		FluentBitImage:             "ghcr.io/cybozu-go/moco/fluent-bit:4.0.3.1",
		ExporterImage:              "ghcr.io/cybozu-go/moco/mysqld_exporter:0.17.2.1",
		SystemNamespace:            *systemNS,
		ClusterManager:             clusters,
		MaxConcurrentReconciles:    1,
		MySQLConfigMapHistoryLimit: 10,
	}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("MySQLCluster reconciler: %w", err)
	}
	if err := (&controllers.StatefulSetPartitionReconciler{
		Client:                  mgr.GetClient(),
		Recorder:                mgr.GetEventRecorderFor("moco-controller"),
		MaxConcurrentReconciles: 1,
		UpdateInterval:          *interval,
		RateLimiter:             rate.NewLimiter(rate.Every(*interval), 1),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("partition controller: %w", err)
	}
	if err := (&controllers.PodWatcher{Client: mgr.GetClient(), ClusterManager: clusters, MaxConcurrentReconciles: 1}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("pod watcher: %w", err)
	}
	if err := (&mocov1beta2.MySQLCluster{}).SetupWebhookWithManager(mgr); err != nil {
		return fmt.Errorf("MySQLCluster webhook: %w", err)
	}
	if err := mocov1beta2.SetupStatefulSetWebhookWithManager(mgr); err != nil {
		return fmt.Errorf("StatefulSet webhook: %w", err)
	}
	// MOCO's controllers write their metrics unconditionally.
	metrics.Register(k8smetrics.Registry)
	if err := mgr.Add(clusters); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// writeServingCert makes a self-signed certificate for 127.0.0.1 in dir
// (tls.crt, tls.key, as controller-runtime's webhook server reads them)
// and ca.crt, the same certificate, for the webhook configuration's
// caBundle.
func writeServingCert(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "moco-harness"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	files := map[string][]byte{"tls.crt": crt, "tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	// Written last: the test waits for it as the sign that the others are there.
	return os.WriteFile(filepath.Join(dir, "ca.crt"), crt, 0o600)
}
