package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// DefaultNodeName is the fake node a full control plane starts with.
const DefaultNodeName = "kwok-node-0"

// kwokPodCIDR is where kwok takes fake pod IPs from. kwok's default,
// 10.0.0.0/24, is envtest's Service range: pods and Services would share
// addresses.
const kwokPodCIDR = "10.244.0.0/16"

// startFull adds kube-controller-manager, kube-scheduler and kwok to a
// running API server, creates the fake node and waits until a pod could
// be scheduled and admitted.
func (c *ControlPlane) startFull() error {
	api := c.testEnv.ControlPlane.GetAPIServer()
	caPath := filepath.Join(c.Dir, "apiserver", "serving-ca.crt")
	if err := os.WriteFile(caPath, api.SecureServing.CA, 0o644); err != nil {
		return err
	}
	ports, err := FreePorts(2)
	if err != nil {
		return err
	}
	kcmPort, schedPort := ports[0], ports[1]

	kcmKubeconfig, err := c.userKubeconfig("system:kube-controller-manager")
	if err != nil {
		return err
	}
	// No --authentication/authorization-kubeconfig: delegated auth would
	// want envtest's (absent) requestheader CA and log an error a second.
	// /healthz is always allowed, and nothing else is asked of these ports.
	kcm, err := c.start("kube-controller-manager",
		"--kubeconfig="+kcmKubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(kcmPort),
		"--cert-dir="+filepath.Join(c.Dir, "kube-controller-manager"),
		// The key envtest gave the apiserver to verify ServiceAccount
		// tokens; the tokens controller signs with it.
		"--service-account-private-key-file="+filepath.Join(api.CertDir, "sa-signer.key"),
		"--root-ca-file="+caPath,
		"--use-service-account-credentials=false",
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--v=2",
	)
	if err != nil {
		return err
	}
	schedKubeconfig, err := c.userKubeconfig("system:kube-scheduler")
	if err != nil {
		return err
	}
	sched, err := c.start("kube-scheduler",
		"--kubeconfig="+schedKubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(schedPort),
		"--cert-dir="+filepath.Join(c.Dir, "kube-scheduler"),
		"--v=2",
	)
	if err != nil {
		return err
	}
	if err := waitHealthz(kcm, kcmPort, cpStartTimeout); err != nil {
		return err
	}
	if err := waitHealthz(sched, schedPort, cpStartTimeout); err != nil {
		return err
	}
	if err := c.startKwok(); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), cpStartTimeout)
	defer cancel()
	if _, err := c.AddFakeNode(ctx, DefaultNodeName); err != nil {
		return err
	}
	c.NodeName = DefaultNodeName
	if err := c.WaitNodeReady(ctx, DefaultNodeName); err != nil {
		return err
	}
	// With ServiceAccount admission on, a pod in a namespace without its
	// default ServiceAccount is refused; the first test namespace usually
	// comes right after start, so wait until the controller is at work.
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.kube.CoreV1().ServiceAccounts(corev1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kube-controller-manager did not create the default ServiceAccount (log: %s): %w", kcm.LogPath, err)
	}
	return nil
}

func (c *ControlPlane) startKwok() error {
	stages, err := c.writeKwokStages()
	if err != nil {
		return err
	}
	home := filepath.Join(c.Dir, "kwok")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	kubeconfig, err := c.userKubeconfig("kwok")
	if err != nil {
		return err
	}
	p, err := startProcess(procSpec{
		name: "kwok",
		path: filepath.Join(c.env.BinDir, "kwok"),
		args: []string{
			"--kubeconfig=" + kubeconfig,
			"--config=" + stages,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
			"--cidr=" + kwokPodCIDR,
			"--node-ip=10.243.0.1",
			// Leases are what the node lifecycle controller watches; 40s
			// renewed every 10s keeps the node Ready on a loaded machine.
			"--node-lease-duration-seconds=40",
		},
		// kwok also reads ~/.kwok/kwok.yaml when it exists: a developer's
		// own configuration must not leak into tests.
		env:    append(os.Environ(), "HOME="+home, "KWOK_WORKDIR="+home),
		logOut: filepath.Join(c.Dir, "kwok.log"),
	})
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

func (c *ControlPlane) start(name string, args ...string) (*Process, error) {
	p, err := startProcess(procSpec{
		name:   name,
		path:   filepath.Join(c.env.BinDir, name),
		args:   args,
		logOut: filepath.Join(c.Dir, name+".log"),
	})
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// userKubeconfig writes a kubeconfig for a system:masters user of its own,
// so the apiserver's log tells the components apart.
func (c *ControlPlane) userKubeconfig(name string) (string, error) {
	u, err := c.testEnv.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, name+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// waitHealthz waits until the component's secure port answers /healthz
// with 200 (its certificate is self-signed, hence no verification).
func waitHealthz(p *Process, port int, timeout time.Duration) error {
	if err := waitTCP(p, port, timeout); err != nil {
		return err
	}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("%s exited (log: %s)", p.Name, p.LogPath)
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not healthy in %s: %s (log: %s)", p.Name, timeout, last, p.LogPath)
}
