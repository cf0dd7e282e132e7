package manifests

// The chart's optional values, rendered by the pinned helm: each renders
// what it promises and nothing when off, values.schema.json refuses bad
// values with helm's own error, and helm lint --strict passes.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/testenv"
)

// helmTemplate renders the chart as release "rekey" in the operator's
// namespace with extra helm arguments.
func helmTemplate(t *testing.T, env *testenv.Env, helm string, set ...string) (string, []*unstructured.Unstructured) {
	t.Helper()
	args := append([]string{"template", "rekey", chartDir, "--namespace", operatorNamespace}, set...)
	what := "helm " + strings.Join(args, " ")
	return what, unstructuredObjects(t, what, runTool(t, env, helm, args...))
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// TestHelmChartDefaultsRenderNoOptionalObjects: with the defaults (one
// replica, no monitor) the chart renders no PodDisruptionBudget (minAvailable
// 1 of 1 would block every drain) and no monitoring.coreos.com object (the
// prometheus-operator CRDs may not exist); replicas: 1 set explicitly
// neither.
func TestHelmChartDefaultsRenderNoOptionalObjects(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	for _, set := range [][]string{nil, {"--set", "replicas=1"}, {"--set", "replicas=0"}} {
		what, objs := helmTemplate(t, env, helm, set...)
		for _, o := range objs {
			if o.GetKind() == "PodDisruptionBudget" || strings.HasPrefix(o.GetAPIVersion(), "monitoring.coreos.com/") {
				t.Errorf("%s renders %s", what, describe(o))
			}
		}
		for _, d := range ofKind(objs, "Deployment") {
			tmpl, _, _ := unstructured.NestedMap(d.Object, "spec", "template")
			if a, ok, _ := unstructured.NestedMap(tmpl, "metadata", "annotations"); ok {
				t.Errorf("%s: pod template annotations %v without podAnnotations", what, a)
			}
			if p, ok, _ := unstructured.NestedString(tmpl, "spec", "priorityClassName"); ok {
				t.Errorf("%s: priorityClassName %q without the value", what, p)
			}
		}
	}
}

// TestInstallHelmChartOptions installs the chart with every pod option set
// into a real API server, and reads back from the server that each landed
// where it should: extraArgs and the flag values in the container's
// arguments, podAnnotations/podLabels on the pod template (next to the
// selector labels), priorityClassName, and a PodDisruptionBudget selecting
// exactly the manager's pods.
func TestInstallHelmChartOptions(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	what, objs := helmTemplate(t, env, helm, "--include-crds",
		"--set", "replicas=3",
		"--set", "podDisruptionBudget.minAvailable=2",
		"--set", `podAnnotations.example\.com/owner=payments`,
		"--set", "podLabels.team=payments",
		"--set", "priorityClassName=rekey-critical",
		"--set", "extraArgs={--zap-stacktrace-level=panic,--zap-time-encoding=rfc3339}",
		"--set", "instanceConcurrency=3",
		"--set", "resyncPeriod=2m",
		"--set", "defaultGracePeriod=7m",
		"--set", "rotationStuckAfter=0",
		"--set", "logging.level=debug",
		"--set", "logging.encoder=console",
		"--set", "ceph.cliPath=/usr/local/bin/ceph",
		"--set", "ceph.workDir=/run/ceph-work",
		"--set", "ceph.workDirSizeLimit=8Mi",
		"--set", "terminationGracePeriodSeconds=90")
	checkManagerPod(t, what, objs)
	if n := len(ofKind(objs, "PodDisruptionBudget")); n != 1 {
		t.Fatalf("%s renders %d PodDisruptionBudgets, want 1", what, n)
	}

	k := newCluster(t)
	k.install(t, what, objs, operatorNamespace)
	k.checkPresent(t, what, objs)

	ctx := context.Background()
	dep := &appsv1.Deployment{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "rekey"}, dep); err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template
	if got := pod.Annotations["example.com/owner"]; got != "payments" {
		t.Errorf("pod template annotation example.com/owner = %q, want payments (annotations %v)", got, pod.Annotations)
	}
	if got := pod.Labels["team"]; got != "payments" {
		t.Errorf("pod template label team = %q, want payments (labels %v)", got, pod.Labels)
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the Deployment's selector %v no longer matches its pod template's labels %v (%v)", dep.Spec.Selector, pod.Labels, err)
	}
	if pod.Spec.PriorityClassName != "rekey-critical" {
		t.Errorf("priorityClassName %q, want rekey-critical", pod.Spec.PriorityClassName)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g != 90 {
		t.Errorf("terminationGracePeriodSeconds %v, want 90", g)
	}
	if *dep.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3", *dep.Spec.Replicas)
	}
	args := pod.Spec.Containers[0].Args
	for _, want := range []string{"--instance-concurrency=3", "--resync-period=2m", "--default-grace-period=7m",
		"--rotation-stuck-after=0", "--zap-log-level=debug", "--zap-encoder=console",
		"--ceph-cli=/usr/local/bin/ceph", "--ceph-work-dir=/run/ceph-work", "--leader-elect"} {
		if !slices.Contains(args, want) {
			t.Errorf("manager arguments %q lack %s", args, want)
		}
	}
	// extraArgs come last, in order, so they can override the chart's own.
	if n := len(args); n < 2 || args[n-2] != "--zap-stacktrace-level=panic" || args[n-1] != "--zap-time-encoding=rfc3339" {
		t.Errorf("manager arguments %q do not end with the extraArgs", args)
	}
	sizeOK := false
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.String() == "8Mi" {
			sizeOK = true
		}
	}
	if !sizeOK {
		t.Errorf("no emptyDir with ceph.workDirSizeLimit 8Mi: %+v", pod.Spec.Volumes)
	}

	pdb := &policyv1.PodDisruptionBudget{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "rekey"}, pdb); err != nil {
		t.Fatalf("the PodDisruptionBudget: %v", err)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("PodDisruptionBudget minAvailable %v, want 2", pdb.Spec.MinAvailable)
	}
	psel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || psel.Empty() || !psel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("PodDisruptionBudget selector %v does not select the manager's pods %v (%v)", pdb.Spec.Selector, pod.Labels, err)
	}
	if psel.Matches(labels.Set{"app.kubernetes.io/name": "rekey", "app.kubernetes.io/instance": "other"}) {
		t.Errorf("PodDisruptionBudget selector %v also selects another release's pods", pdb.Spec.Selector)
	}
}

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
			dep := ofKind(objs, "Deployment")[0]
			var metricsAddr string
			for _, a := range managerArgs(objs) {
				if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
					metricsAddr = v
				}
			}
			podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
			containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
			ports, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "ports")
			containerPort := map[string]string{}
			for _, p := range ports {
				pm := p.(map[string]any)
				containerPort[fmt.Sprint(pm["name"])] = fmt.Sprint(pm["containerPort"])
			}

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

// TestHelmChartSchema: values.schema.json refuses wrong types, values out
// of range or not in an enum, malformed durations and unknown keys with
// helm's schema error naming the value; the defaults and valid edge values
// pass.
func TestHelmChartSchema(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	const schemaErr = "values don't meet the specifications of the schema"
	bad := []struct{ set, want string }{
		{"replicas=two", "at '/replicas': got string, want integer"},
		{"replicas=-1", "/replicas"},
		{"replica=2", "additional properties 'replica' not allowed"},
		{"instanceConcurrency=0", "/instanceConcurrency"},
		{"terminationGracePeriodSeconds=30", "/terminationGracePeriodSeconds"},
		{"resyncPeriod=5 minutes", "/resyncPeriod"},
		{"defaultGracePeriod=5", "/defaultGracePeriod"},
		{"rotationStuckAfter=never", "/rotationStuckAfter"},
		{"logging.level=verbose", "/logging/level"},
		{"logging.encoder=text", "/logging/encoder"},
		{"metrics.port=70000", "/metrics/port"},
		{"metrics.secure=yes", "/metrics/secure"},
		{"metrics.monitor.kind=Probe", "/metrics/monitor/kind"},
		{"metrics.monitor.interval=often", "/metrics/monitor/interval"},
		{"metrics.alerts.maxCredentialAgeDays=0", "/metrics/alerts/maxCredentialAgeDays"},
		{"metrics.alerts.refusalsFor=soon", "/metrics/alerts/refusalsFor"},
		{"metrics.service.type=ExternalName", "/metrics/service/type"},
		{"image.pullPolicy=Sometimes", "/image/pullPolicy"},
		{"podSecurityContext.runAsUser=0", "/podSecurityContext/runAsUser"},
		{"podDisruptionBudget.minAvailable=half", "/podDisruptionBudget/minAvailable"},
		{"watchNamespaces={Bad_NS}", "/watchNamespaces/0"},
		{"rbac.secretNamespaces={a.b}", "/rbac/secretNamespaces/0"},
		{"extraArgs={-v}", "/extraArgs/0"},
		{"ceph.workDir=relative", "/ceph/workDir"},
		{"ceph.workDirSizeLimit=lots", "/ceph/workDirSizeLimit"},
		{`podLabels.app\.kubernetes\.io/name=x`, "invalid propertyName 'app.kubernetes.io/name'"},
	}
	for _, b := range bad {
		args := []string{"template", "rekey", chartDir, "--namespace", operatorNamespace, "--set", b.set}
		_, stderr, err := tryTool(t, env, helm, args...)
		if err == nil || !strings.Contains(stderr.String(), schemaErr) || !strings.Contains(stderr.String(), b.want) {
			t.Errorf("helm template --set %s: %v, stderr %q; want helm's schema error naming %q", b.set, err, stderr, b.want)
		}
	}
	for _, good := range [][]string{
		{"--set", "rotationStuckAfter=0"},
		{"--set-string", "rotationStuckAfter=0"},
		{"--set", "logging.level=3"},
		{"--set", "podDisruptionBudget.minAvailable=50%", "--set", "replicas=2"},
		{"--set", "replicas=0"},
		{"--set", "metrics.monitor.interval=1m30s"},
	} {
		args := append([]string{"template", "rekey", chartDir, "--namespace", operatorNamespace}, good...)
		if _, stderr, err := tryTool(t, env, helm, args...); err != nil {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
	}
}

// TestHelmLint: helm lint --strict passes on the defaults and with every
// option on, and fails on a value the schema refuses (so the lint does
// check the schema).
func TestHelmLint(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	everything := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(everything, []byte(`replicas: 2
podAnnotations: {example.com/owner: payments}
podLabels: {team: payments}
priorityClassName: rekey-critical
extraArgs: [--zap-stacktrace-level=panic]
metrics:
  monitor: {enabled: true, labels: {release: prom}}
rbac: {clusterWideSecrets: false, secretNamespaces: [apps]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"-f", everything}, {"--set", "watchNamespaces={apps}", "--set", "metrics.monitor.enabled=true", "--set", "metrics.monitor.kind=PodMonitor", "--set", "metrics.monitor.bearerTokenSecret.name=scraper"}} {
		args := append([]string{"lint", "--strict", chartDir}, extra...)
		out := runTool(t, env, helm, args...)
		if !strings.Contains(string(out), "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(string(out), "[WARNING]") || strings.Contains(string(out), "[ERROR]") {
			t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
	args := []string{"lint", "--strict", chartDir, "--set", "replicas=two"}
	stdout, _, err := tryTool(t, env, helm, args...)
	if err == nil || !strings.Contains(stdout.String(), "/replicas") {
		t.Errorf("helm %s: %v\n%s; want a failure naming /replicas", strings.Join(args, " "), err, stdout)
	}
}

// TestCRDUpgradePath proves the CRD upgrade the docs give (Helm installs
// crds/ once and never upgrades it): over a CRD that Helm created (field
// manager helm) from an older chart, `kubectl apply --server-side
// --force-conflicts -f charts/rekey/crds/` — the same server-side apply
// request, made here through the dynamic client — stores the chart's CRD;
// without --force-conflicts the API server refuses it, naming helm.
func TestCRDUpgradePath(t *testing.T) {
	t.Parallel()
	testenv.Require(t)
	crds := unstructuredObjects(t, chartCRDFile, readFile(t, chartCRDFile))
	if len(crds) != 1 || crds[0].GetKind() != "CustomResourceDefinition" {
		t.Fatalf("%s: want one CustomResourceDefinition", chartCRDFile)
	}
	current := crds[0]
	// An older release's CRD: another short name, no printer columns.
	old := current.DeepCopy()
	if err := unstructured.SetNestedStringSlice(old.Object, []string{"legacy-rekey-name"}, "spec", "names", "shortNames"); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(old.Object, "spec", "versions")
	for _, v := range versions {
		delete(v.(map[string]any), "additionalPrinterColumns")
	}
	if err := unstructured.SetNestedSlice(old.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}

	k := newCluster(t)
	dyn, err := dynamic.NewForConfig(k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	ctx := context.Background()
	if _, err := dyn.Resource(gvr).Create(ctx, old, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
		t.Fatal(err)
	}
	k.waitEstablished(t, current.GetName())

	_, err = dyn.Resource(gvr).Apply(ctx, current.GetName(), current, metav1.ApplyOptions{FieldManager: "kubectl"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "helm") {
		t.Errorf("server-side apply without --force-conflicts over Helm's CRD: %v; want a conflict naming helm (the docs say to force)", err)
	}
	if _, err := dyn.Resource(gvr).Apply(ctx, current.GetName(), current, metav1.ApplyOptions{FieldManager: "kubectl", Force: true}); err != nil {
		t.Fatalf("kubectl apply --server-side --force-conflicts -f %s: %v", chartCRDFile, err)
	}
	got, err := dyn.Resource(gvr).Get(ctx, current.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range [][]string{{"spec", "names"}, {"spec", "versions"}, {"spec", "scope"}, {"spec", "group"}} {
		want, _, _ := unstructured.NestedFieldNoCopy(current.Object, path...)
		have, _, _ := unstructured.NestedFieldNoCopy(got.Object, path...)
		if fmt.Sprint(normalize(t, want)) != fmt.Sprint(normalize(t, have)) {
			t.Errorf("after the upgrade the stored CRD's %s differs from %s", strings.Join(path, "."), chartCRDFile)
		}
	}
	k.waitEstablished(t, current.GetName())
}

// normalize round-trips v through JSON, so that values decoded from YAML
// and from the API server compare equal (int64 against float64 numbers).
func normalize(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKustomizePrometheus: the optional config/prometheus overlay renders
// one ServiceMonitor, in the operator's namespace, selecting config/default's
// metrics Service and scraping the port that reaches the container port
// --metrics-bind-address serves, over HTTPS with a bearer token.
func TestKustomizePrometheus(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	kustomize := pinnedTool(t, env, "kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "KUSTOMIZE_VERSION")
	mons := unstructuredObjects(t, "kustomize build config/prometheus", runTool(t, env, kustomize, "build", "config/prometheus"))
	if len(mons) != 1 || mons[0].GetAPIVersion() != "monitoring.coreos.com/v1" || mons[0].GetKind() != "ServiceMonitor" {
		t.Fatalf("config/prometheus renders %v, want one monitoring.coreos.com/v1 ServiceMonitor", mons)
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
	var metricsAddr string
	for _, a := range managerArgs(objs) {
		if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
			metricsAddr = v
		}
	}
	dep := ofKind(objs, "Deployment")[0]
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	ports, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "ports")
	containerPort := map[string]string{}
	for _, p := range ports {
		pm := p.(map[string]any)
		containerPort[fmt.Sprint(pm["name"])] = fmt.Sprint(pm["containerPort"])
	}
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
