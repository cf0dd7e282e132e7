package deployed

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"rekey.io/rekey/internal/testenv"
)

// applyChart renders the chart and creates every object it renders, as
// the admin; the Deployment and the RBAC are kept for the checks.
func applyChart(t *testing.T, e *testenv.Env, helm string, srv *servers) *chart {
	ctx, k8s := context.Background(), srv.k8s
	// The chart, rendered with helm as `helm install` would (the probe and
	// metrics ports moved off their defaults: the container shares the
	// host's network with other tests).
	ports, err := testenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	metricsPort, healthPort := ports[0], ports[1]
	rendered := runHelm(t, e, helm, "template", "rekey", "charts/rekey", "--namespace", releaseNamespace,
		"--set", "metrics.port="+strconv.Itoa(metricsPort), "--set", "healthProbePort="+strconv.Itoa(healthPort))
	for _, n := range []string{releaseNamespace, appNamespace} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	var dep *appsv1.Deployment
	var rbac []string
	roles := map[string][]rbacv1.PolicyRule{} // kind/namespace/name → rules
	var bindings []rbacv1.RoleBinding         // ClusterRoleBindings with an empty namespace
	for _, o := range decodeAll(t, rendered) {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		switch o.GetKind() {
		case "Deployment":
			dep = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, dep); err != nil {
				t.Fatal(err)
			}
		case "RoleBinding", "ClusterRoleBinding":
			b := rbacv1.RoleBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				t.Fatal(err)
			}
			bindings = append(bindings, b)
		case "Role", "ClusterRole":
			r := rbacv1.Role{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			roles[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = r.Rules
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				b, _ := yaml.Marshal(r)
				rbac = append(rbac, fmt.Sprintf("%s %s: %s", o.GetKind(), o.GetName(), strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " ")))
			}
		}
	}
	if dep == nil {
		t.Fatal("the chart renders no Deployment")
	}
	t.Logf("the chart's RBAC, applied as rendered:\n  %s", strings.Join(rbac, "\n  "))
	return &chart{dep: dep, roles: roles, bindings: bindings, metricsPort: metricsPort, healthPort: healthPort}
}

func runHelm(t *testing.T, e *testenv.Env, helm string, args ...string) []byte {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helm, args...)
	cmd.Dir = e.RepoRoot
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

func decodeAll(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("helm template output: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}
