package manifests

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"rekey.io/rekey/internal/testenv"
)

// TestHelmChartNetworkPolicy: networkPolicy.enabled renders an egress
// allow-list selecting exactly the manager's pods, with DNS, the API
// server's CIDRs and ports, and the backends given, nothing else; off (the
// default) renders none; on without the API server's addresses is refused
// (a rule without destinations would allow them all).
func TestHelmChartNetworkPolicy(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	if _, objs := helmTemplate(t, env, helm); len(ofKind(objs, "NetworkPolicy")) != 0 {
		t.Error("the defaults render a NetworkPolicy")
	}
	what, objs := helmTemplate(t, env, helm, "--set", "networkPolicy.enabled=true",
		"--set", "networkPolicy.apiServer.cidrs={10.0.0.1/32}",
		"--set-json", `networkPolicy.backends=[{"to":[{"ipBlock":{"cidr":"10.1.0.0/16"}}],"ports":[{"protocol":"TCP","port":3306}]}]`)
	nps := ofKind(objs, "NetworkPolicy")
	if len(nps) != 1 {
		t.Fatalf("%s: %d NetworkPolicies, want 1", what, len(nps))
	}
	var np networkingv1.NetworkPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(nps[0].Object, &np, true); err != nil {
		t.Fatalf("%s: not a valid NetworkPolicy: %v", what, err)
	}
	deps := ofKind(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%s: %d Deployments", what, len(deps))
	}
	podLabels, _, _ := unstructured.NestedStringMap(deps[0].Object, "spec", "template", "metadata", "labels")
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("the policy selects %s=%s, the manager's pods have %v", k, v, podLabels)
		}
	}
	if len(np.Spec.PodSelector.MatchLabels) == 0 {
		t.Error("the policy selects every pod of the namespace")
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeEgress {
		t.Errorf("policy types %v, want Egress only (the metrics port keeps its own access)", np.Spec.PolicyTypes)
	}
	var got []string
	for _, r := range np.Spec.Egress {
		if len(r.To) == 0 {
			t.Errorf("an egress rule without destinations allows them all: %+v", r)
		}
		var to, ports []string
		for _, p := range r.To {
			switch {
			case p.IPBlock != nil:
				to = append(to, p.IPBlock.CIDR)
			case p.PodSelector != nil:
				to = append(to, "pods "+strings.Join(mapPairs(p.PodSelector.MatchLabels), ","))
			}
		}
		for _, p := range r.Ports {
			ports = append(ports, string(*p.Protocol)+"/"+portString(p.Port))
		}
		got = append(got, strings.Join(to, "+")+" "+strings.Join(ports, ","))
	}
	want := []string{"pods k8s-app=kube-dns UDP/53,TCP/53", "10.0.0.1/32 TCP/443,TCP/6443", "10.1.0.0/16 TCP/3306"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("egress rules:\n got %q\nwant %q", got, want)
	}
	_, stderr, err := tryTool(t, env, helm, "template", "rekey", chartDir, "--set", "networkPolicy.enabled=true")
	if err == nil || !strings.Contains(stderr.String(), "networkPolicy.apiServer.cidrs") {
		t.Errorf("networkPolicy.enabled without the API server's addresses: %v, %s; want a refusal naming networkPolicy.apiServer.cidrs", err, stderr)
	}
}

func mapPairs(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func portString(p *intstr.IntOrString) string {
	if p == nil {
		return "*"
	}
	return p.String()
}
