package deployed

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkMetrics: the secure metrics endpoint refuses a scrape without a
// token and serves one with a token bound to the metrics-reader role.
func checkMetrics(t *testing.T, srv *servers, ch *chart, run *podRun) {
	ctx, k8s, kube := context.Background(), srv.k8s, srv.cp.Clientset()
	metricsPort := ch.metricsPort
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
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: metricsReader(t, ch)},
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
}

// metricsReader is the name of the metrics-reader ClusterRole the chart
// renders (named after the release, not the Deployment).
func metricsReader(t *testing.T, ch *chart) string {
	t.Helper()
	for key := range ch.roles {
		if name, ok := strings.CutPrefix(key, "ClusterRole//"); ok && strings.HasSuffix(name, "-metrics-reader") {
			return name
		}
	}
	t.Fatal("the chart renders no metrics-reader ClusterRole")
	return ""
}

// checkProbesAndLog: the probes still answer and the container's log holds
// no refusal by the API server. It returns the log, for the leak check.
func checkProbesAndLog(t *testing.T, ch *chart, run *podRun) []byte {
	healthPort := ch.healthPort
	// The image's probes still answer, and the log shows no request the
	// API server refused, and no credential.
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
	return logText
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

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
