package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// freePort is a loopback port nothing listens on right now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// metricsReaderRole is the ClusterRole rekey-metrics-reader exactly as
// config/rbac ships it.
func metricsReaderRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.RepoRoot, "config/rbac/user_roles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal(doc, &r); err == nil && r.Name == "rekey-metrics-reader" {
			return &r
		}
	}
	t.Fatal("config/rbac/user_roles.yaml has no rekey-metrics-reader")
	return nil
}

// serviceAccountToken is a token the API server issues for ns/name.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := ctxT(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	tr, err := cp.Clientset().CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// TestManagerModes runs the manager binary as the chart deploys it by
// default (secure metrics) and in namespaced mode: metrics answer only
// callers the API server authorizes, and a set outside the watched
// namespaces is not acted on.
func TestManagerModes(t *testing.T) {
	watched, other := newNamespace(t), newNamespace(t)
	addr := freePort(t)
	startManagerProcessWith(t, "", "--metrics-bind-address", addr, "--metrics-secure=true", "--watch-namespaces", watched)
	ctx := ctxT(t)

	// Sets that name another namespace without its consent: the manager
	// refuses them at once (no backend needed), which shows whether it
	// looked at them at all.
	for _, ns := range []string{watched, other} {
		cs := unreachableSet(ns, "probe", []v1.SecretTarget{{Namespace: "kube-system", Name: "probe"}}, nil)
		if err := k8s.Create(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	waitDegraded(t, watched, "probe", reason.NamespaceNotAllowed)
	time.Sleep(3 * time.Second) // the manager handled the watched set; it had every chance at the other
	if cs := getSet(t, other, "probe"); cs.Status.Phase != "" || len(cs.Status.Conditions) != 0 {
		t.Errorf("a set outside --watch-namespaces was acted on: %s", stateOf(cs))
	}

	// Metrics: HTTPS (self-signed), TokenReview + SubjectAccessReview.
	role := metricsReaderRole(t)
	if err := k8s.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), role) })
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rekey-metrics-reader-" + watched},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: watched, Name: "scraper"}}}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding) })
	scraper := serviceAccountToken(t, watched, "scraper")
	nobody := serviceAccountToken(t, watched, "nobody")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The manager's certificate is self-signed; what is tested here is
		// who it answers.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(scheme, token string) (int, string) {
		req, _ := http.NewRequest("GET", scheme+"://"+addr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, time.Minute, "the metrics endpoint to serve the authorized scraper", func() (bool, string) {
		code, body := get("https", scraper)
		return code == http.StatusOK && strings.Contains(body, "rekey_credentialset_phase"), tail(body, 200)
	})
	for _, c := range []struct {
		what, scheme, token string
		want                int
	}{
		{"no token", "https", "", http.StatusUnauthorized},
		{"a token not allowed get on /metrics", "https", nobody, http.StatusForbidden},
		// controller-runtime's filter answers 500 when the TokenReview
		// itself fails on a token that is not a JWT: refused all the same.
		{"a forged token", "https", "not-a-token", 0},
	} {
		code, body := get(c.scheme, c.token)
		if c.want != 0 && code != c.want || code == http.StatusOK || strings.Contains(body, "rekey_") {
			t.Errorf("metrics with %s: HTTP %d (%s), want a refusal (%d)", c.what, code, tail(body, 200), c.want)
		}
	}
	if code, _ := get("http", scraper); code == http.StatusOK {
		t.Error("metrics answered plain HTTP")
	}
}
