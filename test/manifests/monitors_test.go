package manifests

// The prometheus-operator objects of the chart (metrics.monitor) and of
// the config/prometheus overlay: each scrapes the port the manager serves
// metrics on, with the authentication the endpoint demands.

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"rekey.io/rekey/internal/testenv"
)

// TestHelmChartMonitors: metrics.monitor renders one prometheus-operator
// object of the chosen kind that scrapes the port serving the metrics, with
// the authentication the endpoint demands; misconfigurations fail with a
// message naming the value to fix.
func TestHelmChartMonitors(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	cases := []struct {
		name, kind string
		set        []string
		scheme     string
		bearerFile bool   // bearerTokenFile (Prometheus's own token)
		secret     string // authorization credentials Secret
	}{
		{"ServiceMonitor, secure", "ServiceMonitor", []string{"--set", "metrics.monitor.enabled=true", "--set", "metrics.monitor.labels.release=prom"},
			"https", true, ""},
		{"ServiceMonitor, token Secret", "ServiceMonitor", []string{"--set", "metrics.monitor.enabled=true", "--set", "metrics.monitor.bearerTokenSecret.name=scraper"},
			"https", false, "scraper"},
		{"ServiceMonitor, plain HTTP", "ServiceMonitor", []string{"--set", "metrics.monitor.enabled=true", "--set", "metrics.secure=false"},
			"http", false, ""},
		{"PodMonitor, token Secret", "PodMonitor", []string{"--set", "metrics.monitor.enabled=true", "--set", "metrics.monitor.kind=PodMonitor",
			"--set", "metrics.monitor.bearerTokenSecret.name=scraper", "--set", "metrics.service.enabled=false", "--set", "metrics.port=9443"},
			"https", false, "scraper"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			what, objs := helmTemplate(t, env, helm, c.set...)
			var mons []*unstructured.Unstructured
			for _, o := range objs {
				if strings.HasPrefix(o.GetAPIVersion(), "monitoring.coreos.com/") {
					mons = append(mons, o)
				}
			}
			if len(mons) != 1 || mons[0].GetAPIVersion() != "monitoring.coreos.com/v1" || mons[0].GetKind() != c.kind {
				t.Fatalf("%s renders %d monitoring.coreos.com objects (%v), want one monitoring.coreos.com/v1 %s", what, len(mons), mons, c.kind)
			}
			m := mons[0]
			if m.GetNamespace() != operatorNamespace {
				t.Errorf("%s: %s in namespace %q, want %s", what, describe(m), m.GetNamespace(), operatorNamespace)
			}
			if slices.Contains(c.set, "metrics.monitor.labels.release=prom") && m.GetLabels()["release"] != "prom" {
				t.Errorf("%s: metrics.monitor.labels missing from %v", what, m.GetLabels())
			}
			matchLabels, _, _ := unstructured.NestedStringMap(m.Object, "spec", "selector", "matchLabels")
			sel := labels.SelectorFromSet(matchLabels)
			endpointsField := "endpoints"
			if c.kind == "PodMonitor" {
				endpointsField = "podMetricsEndpoints"
			}
			eps, _, _ := unstructured.NestedSlice(m.Object, "spec", endpointsField)
			if len(eps) != 1 {
				t.Fatalf("%s: %s has %d spec.%s, want 1", what, describe(m), len(eps), endpointsField)
			}
			ep := eps[0].(map[string]any)

			// The port the manager serves metrics on, by the container port's name.
			metricsAddr, containerPort := metricsPorts(objs)
			dep := ofKind(objs, "Deployment")[0]
			podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")

			switch c.kind {
			case "ServiceMonitor":
				svcs := ofKind(objs, "Service")
				var scraped []string
				for _, s := range svcs {
					if !sel.Matches(labels.Set(s.GetLabels())) {
						continue
					}
					svcPorts, _, _ := unstructured.NestedSlice(s.Object, "spec", "ports")
					for _, p := range svcPorts {
						pm := p.(map[string]any)
						if pm["name"] == ep["port"] {
							scraped = append(scraped, fmt.Sprint(pm["targetPort"]))
						}
					}
					svcSel, _, _ := unstructured.NestedStringMap(s.Object, "spec", "selector")
					if !labels.SelectorFromSet(svcSel).Matches(labels.Set(podLabels)) {
						t.Errorf("%s: Service %s does not select the manager's pods", what, s.GetName())
					}
				}
				if len(scraped) != 1 || ":"+containerPort[scraped[0]] != metricsAddr {
					t.Errorf("%s: the ServiceMonitor's port %v reaches container ports %v, want the one of --metrics-bind-address=%s", what, ep["port"], scraped, metricsAddr)
				}
			case "PodMonitor":
				if !sel.Matches(labels.Set(podLabels)) {
					t.Errorf("%s: PodMonitor selector %v does not select the manager's pods %v", what, matchLabels, podLabels)
				}
				if ":"+containerPort[fmt.Sprint(ep["port"])] != metricsAddr {
					t.Errorf("%s: PodMonitor port %v is container port %q, want the one of --metrics-bind-address=%s", what, ep["port"], containerPort[fmt.Sprint(ep["port"])], metricsAddr)
				}
			}
			if len(matchLabels) == 0 {
				t.Errorf("%s: empty selector", what)
			}
			if ep["path"] != "/metrics" || ep["scheme"] != c.scheme {
				t.Errorf("%s: endpoint path %v scheme %v, want /metrics %s", what, ep["path"], ep["scheme"], c.scheme)
			}
			file, _ := ep["bearerTokenFile"].(string)
			if (file == "/var/run/secrets/kubernetes.io/serviceaccount/token") != c.bearerFile || (!c.bearerFile && file != "") {
				t.Errorf("%s: bearerTokenFile %q, want set=%v", what, file, c.bearerFile)
			}
			cred, _, _ := unstructured.NestedStringMap(ep, "authorization", "credentials")
			if cred["name"] != c.secret || (c.secret != "" && cred["key"] != "token") {
				t.Errorf("%s: authorization credentials %v, want Secret %q key token", what, cred, c.secret)
			}
			if skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify"); skip != (c.scheme == "https") {
				t.Errorf("%s: tlsConfig.insecureSkipVerify %v with scheme %s", what, skip, c.scheme)
			}
		})
	}

	refusals := []struct {
		set  []string
		want string
	}{
		{[]string{"--set", "metrics.monitor.enabled=true", "--set", "metrics.monitor.kind=PodMonitor"}, "metrics.monitor.bearerTokenSecret.name"},
		{[]string{"--set", "metrics.monitor.enabled=true", "--set", "metrics.service.enabled=false"}, "needs metrics.service.enabled"},
		{[]string{"--set", "metrics.monitor.enabled=true", "--set", "metrics.enabled=false"}, "needs metrics.enabled"},
	}
	for _, r := range refusals {
		args := append([]string{"template", "rekey", chartDir, "--namespace", operatorNamespace}, r.set...)
		_, stderr, err := tryTool(t, env, helm, args...)
		if err == nil || !strings.Contains(stderr.String(), r.want) {
			t.Errorf("helm %s: %v %s; want a failure naming %q", strings.Join(args, " "), err, stderr, r.want)
		}
	}
}

// TestKustomizePrometheus: the optional config/prometheus overlay renders
// the PrometheusRule (alerts_test.go) and one ServiceMonitor, in the operator's namespace, selecting config/default's
// metrics Service and scraping the port that reaches the container port
// --metrics-bind-address serves, over HTTPS with a bearer token.
func TestKustomizePrometheus(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	kustomize := pinnedTool(t, env, "kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "KUSTOMIZE_VERSION")
	all := unstructuredObjects(t, "kustomize build config/prometheus", runTool(t, env, kustomize, "build", "config/prometheus"))
	mons := ofKind(all, "ServiceMonitor")
	if len(all) != 2 || len(mons) != 1 || mons[0].GetAPIVersion() != "monitoring.coreos.com/v1" || len(ofKind(all, "PrometheusRule")) != 1 {
		t.Fatalf("config/prometheus renders %v, want one monitoring.coreos.com/v1 ServiceMonitor and the PrometheusRule", all)
	}
	m := mons[0]
	if m.GetNamespace() != operatorNamespace {
		t.Errorf("%s: want namespace %s", describe(m), operatorNamespace)
	}
	objs := unstructuredObjects(t, "kustomize build config/default", runTool(t, env, kustomize, "build", "config/default"))
	matchLabels, _, _ := unstructured.NestedStringMap(m.Object, "spec", "selector", "matchLabels")
	eps, _, _ := unstructured.NestedSlice(m.Object, "spec", "endpoints")
	if len(matchLabels) == 0 || len(eps) != 1 {
		t.Fatalf("%s: selector %v, %d endpoints; want a selector and one endpoint", describe(m), matchLabels, len(eps))
	}
	ep := eps[0].(map[string]any)
	metricsAddr, containerPort := metricsPorts(objs)
	var reached []string
	for _, s := range ofKind(objs, "Service") {
		if s.GetNamespace() != m.GetNamespace() || !labels.SelectorFromSet(matchLabels).Matches(labels.Set(s.GetLabels())) {
			continue
		}
		svcPorts, _, _ := unstructured.NestedSlice(s.Object, "spec", "ports")
		for _, p := range svcPorts {
			if pm := p.(map[string]any); pm["name"] == ep["port"] {
				reached = append(reached, ":"+containerPort[fmt.Sprint(pm["targetPort"])])
			}
		}
	}
	if len(reached) != 1 || reached[0] != metricsAddr {
		t.Errorf("%s: port %v reaches %v, want exactly the container port of --metrics-bind-address=%s", describe(m), ep["port"], reached, metricsAddr)
	}
	if ep["scheme"] != "https" || ep["path"] != "/metrics" || ep["bearerTokenFile"] == nil {
		t.Errorf("%s: endpoint %v, want https /metrics with a bearer token", describe(m), ep)
	}
}

// metricsPorts returns the manager's --metrics-bind-address and its
// container's port numbers by port name, from the rendered Deployment.
func metricsPorts(objs []*unstructured.Unstructured) (metricsAddr string, containerPort map[string]string) {
	for _, a := range managerArgs(objs) {
		if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
			metricsAddr = v
		}
	}
	dep := ofKind(objs, "Deployment")[0]
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	ports, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "ports")
	containerPort = map[string]string{}
	for _, p := range ports {
		pm := p.(map[string]any)
		containerPort[fmt.Sprint(pm["name"])] = fmt.Sprint(pm["containerPort"])
	}
	return metricsAddr, containerPort
}
