package deployed

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// startPod plays the kubelet: it creates the Deployment's pod, runs its
// container with runc from the image, and waits for its readiness probe.
// It returns the running container and its ServiceAccount token.
func startPod(t *testing.T, srv *servers, ch *chart) (*podRun, string) {
	ctx, k8s, cp, work, archive := context.Background(), srv.k8s, srv.cp, srv.work, srv.archive
	dep, healthPort := ch.dep, ch.healthPort
	var err error
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
	return run, tr.Status.Token
}
