package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// MOCOCRDs is the folder holding MOCO's CustomResourceDefinitions at the
// pinned MOCO_VERSION, taken from its Go module by hack/env/moco.sh.
func (e *Env) MOCOCRDs() (dir, version string, err error) {
	version = e.Versions["MOCO_VERSION"]
	dir = filepath.Join(e.mocoDir(), "crd")
	return dir, version, e.requireFile(filepath.Join(dir, "moco.cybozu.com_mysqlclusters.yaml"), "MOCO's CRDs")
}

// MOCOHarness is moco-harness, which runs MOCO's own controllers and
// webhooks from its Go module (built from hack/tools/moco by
// hack/env/moco.sh), and MOCO's webhook configuration (manifests.yaml).
func (e *Env) MOCOHarness() (bin, webhooks string, err error) {
	bin = filepath.Join(e.mocoDir(), "bin", "moco-harness")
	webhooks = filepath.Join(e.mocoDir(), "webhook", "manifests.yaml")
	if err := e.requireFile(bin, "moco-harness"); err != nil {
		return "", "", err
	}
	return bin, webhooks, e.requireFile(webhooks, "MOCO's webhook configuration")
}

// MOCOPlayedCRDs holds the CRDs MOCO's controller needs beside its own
// and that no controller here serves (cert-manager's Certificate).
func (e *Env) MOCOPlayedCRDs() string {
	return filepath.Join(e.RepoRoot, "hack", "tools", "moco", "played")
}

func (e *Env) mocoDir() string { return filepath.Join(e.Cache, "moco-"+e.Versions["MOCO_VERSION"]) }

// StartMOCOHarness runs moco-harness on control plane c (its processes
// stop with c) and registers MOCO's own webhook configuration
// (manifests.yaml, its service reference replaced by the harness's
// loopback address) so that the API server calls MOCO's webhooks.
// systemNamespace is MOCO's namespace, which must exist.
func (e *Env) StartMOCOHarness(c *ControlPlane, systemNamespace string) (*Process, error) {
	bin, webhooks, err := e.MOCOHarness()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(c.Dir, "moco-harness-certs")
	p, err := startProcess(procSpec{name: "moco-harness", path: bin, logOut: filepath.Join(c.Dir, "moco-harness.log"),
		args: []string{"--kubeconfig=" + c.Kubeconfig, "--system-namespace=" + systemNamespace,
			"--webhook-port=" + strconv.Itoa(port), "--cert-dir=" + certDir}})
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	if err := waitTCP(p, port, 2*time.Minute); err != nil {
		return p, err
	}
	ca, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
	if err != nil {
		return p, err
	}
	return p, registerMOCOWebhooks(c, webhooks, fmt.Sprintf("https://127.0.0.1:%d", port), ca)
}

// registerMOCOWebhooks creates MOCO's webhook configurations as MOCO's
// manifests.yaml declares them (rules, failure policy, paths), served at
// base instead of MOCO's Service.
func registerMOCOWebhooks(c *ControlPlane, manifests, base string, ca []byte) error {
	raw, err := os.ReadFile(manifests)
	if err != nil {
		return err
	}
	ctx := context.Background()
	for _, doc := range strings.Split(string(raw), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return err
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			var m admissionv1.MutatingWebhookConfiguration
			if err := yaml.UnmarshalStrict([]byte(doc), &m); err != nil {
				return err
			}
			m.Name = "moco-" + m.Name
			for i := range m.Webhooks {
				m.Webhooks[i].ClientConfig = clientConfig(m.Webhooks[i].ClientConfig, base, ca)
			}
			if _, err := c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &m, metav1.CreateOptions{}); err != nil {
				return err
			}
		case "ValidatingWebhookConfiguration":
			var v admissionv1.ValidatingWebhookConfiguration
			if err := yaml.UnmarshalStrict([]byte(doc), &v); err != nil {
				return err
			}
			v.Name = "moco-" + v.Name
			for i := range v.Webhooks {
				v.Webhooks[i].ClientConfig = clientConfig(v.Webhooks[i].ClientConfig, base, ca)
			}
			if _, err := c.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &v, metav1.CreateOptions{}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unexpected kind %q", manifests, meta.Kind)
		}
	}
	return nil
}

func clientConfig(cc admissionv1.WebhookClientConfig, base string, ca []byte) admissionv1.WebhookClientConfig {
	path := ""
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	url := base + path
	return admissionv1.WebhookClientConfig{URL: &url, CABundle: ca}
}
