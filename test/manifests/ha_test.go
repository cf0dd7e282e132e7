package manifests

// One install, two renderings: the kustomize tree and the chart (release
// "rekey") create objects of the same kinds and names, run the same manager
// (two replicas, leader election, a PodDisruptionBudget, spread over
// nodes), and the chart's pod values land where they promise.

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/testenv"
)

// managerName is the manager's Deployment, ServiceAccount and
// PodDisruptionBudget in both installs (the chart with release "rekey").
const managerName = "rekey-controller-manager"

// objectKeys lists "Kind namespace/name" of every object but those in
// skip. (kustomize puts its namespace on the admission policies too; the
// API server, knowing them cluster-scoped, ignores it.)
func objectKeys(objs []*unstructured.Unstructured, skip ...string) []string {
	var out []string
	for _, o := range objs {
		if slices.Contains(skip, o.GetKind()) {
			continue
		}
		o = o.DeepCopy()
		if clusterScoped[o.GetKind()] {
			o.SetNamespace("")
		}
		out = append(out, describe(o))
	}
	sort.Strings(out)
	return out
}

func deploymentOf(t *testing.T, what string, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	deps := ofKind(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%s renders %d Deployments, want 1", what, len(deps))
	}
	dep := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(deps[0].Object, dep); err != nil {
		t.Fatal(err)
	}
	return dep
}

// checkHA: two replicas with leader election, a PodDisruptionBudget that
// keeps one of them and selects exactly the Deployment's pods, and a spread
// over nodes (soft, so one node still runs both) among those pods.
func checkHA(t *testing.T, what string, objs []*unstructured.Unstructured) {
	t.Helper()
	dep := deploymentOf(t, what, objs)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("%s: replicas %v, want 2", what, dep.Spec.Replicas)
	}
	if !slices.Contains(managerArgs(objs), "--leader-elect") {
		t.Errorf("%s: two replicas without --leader-elect", what)
	}
	podLabels := labels.Set(dep.Spec.Template.Labels)
	pdbs := ofKind(objs, "PodDisruptionBudget")
	if len(pdbs) != 1 {
		t.Fatalf("%s renders %d PodDisruptionBudgets, want 1", what, len(pdbs))
	}
	pdb := &policyv1.PodDisruptionBudget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(pdbs[0].Object, pdb); err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Namespace != dep.Namespace {
		t.Errorf("%s: PodDisruptionBudget %s/%s keeps %v, want 1 in %s", what, pdb.Namespace, pdb.Name, pdb.Spec.MinAvailable, dep.Namespace)
	}
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(podLabels) {
		t.Errorf("%s: PodDisruptionBudget selector %v does not select the manager's pods %v (%v)", what, pdb.Spec.Selector, podLabels, err)
	}
	spread := dep.Spec.Template.Spec.TopologySpreadConstraints
	if len(spread) != 1 {
		t.Fatalf("%s: topologySpreadConstraints %+v, want one over nodes", what, spread)
	}
	c := spread[0]
	if c.TopologyKey != "kubernetes.io/hostname" || c.MaxSkew != 1 || c.WhenUnsatisfiable != corev1.ScheduleAnyway {
		t.Errorf("%s: spread %+v, want maxSkew 1 over kubernetes.io/hostname, ScheduleAnyway", what, c)
	}
	if sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector); err != nil || sel.Empty() || !sel.Matches(podLabels) {
		t.Errorf("%s: the spread's selector %v does not select the manager's pods %v (%v)", what, c.LabelSelector, podLabels, err)
	}
}

// TestKustomizeAndChartAgree: config/default and the chart's defaults
// (release "rekey" in rekey-system) render the same objects by kind and
// name — so docs quote one set of names, and `kubectl apply -k` over a
// Helm install meets the same Deployment instead of adding a second —
// and the same manager pod, but for the labels each selects its pods by.
func TestKustomizeAndChartAgree(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	kustomize := pinnedTool(t, env, "kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "KUSTOMIZE_VERSION")
	kobjs := unstructuredObjects(t, "kustomize build config/default", runTool(t, env, kustomize, "build", "config/default"))
	what, cobjs := helmTemplate(t, env, helm, "--include-crds")

	// The Namespace is helm's --create-namespace.
	kkeys, ckeys := objectKeys(kobjs, "Namespace"), objectKeys(cobjs)
	if !slices.Equal(kkeys, ckeys) {
		t.Errorf("config/default and %s differ in objects:\n  only kustomize: %v\n  only chart: %v", what, minus(kkeys, ckeys), minus(ckeys, kkeys))
	}
	for _, k := range []string{"Deployment " + operatorNamespace + "/" + managerName, "ServiceAccount " + operatorNamespace + "/" + managerName,
		"PodDisruptionBudget " + operatorNamespace + "/" + managerName, "Service " + operatorNamespace + "/" + managerName + "-metrics"} {
		if !slices.Contains(kkeys, k) || !slices.Contains(ckeys, k) {
			t.Errorf("want %s in both installs", k)
		}
	}

	// The optional objects: config/prometheus and config/grafana, and the
	// chart's monitor, alerts and dashboard.
	var kopt []*unstructured.Unstructured
	for _, dir := range []string{"config/prometheus", "config/grafana"} {
		kopt = append(kopt, unstructuredObjects(t, dir, runTool(t, env, kustomize, "build", dir))...)
	}
	owhat, oobjs := helmTemplate(t, env, helm, "--set", "metrics.monitor.enabled=true", "--set", "metrics.alerts.enabled=true",
		"--set", "metrics.dashboard.enabled=true")
	if k, c := objectKeys(kopt), minus(objectKeys(oobjs), ckeys); !slices.Equal(k, c) {
		t.Errorf("config/prometheus and config/grafana render %v; %s adds %v: want the same", k, owhat, c)
	}

	checkHA(t, "config/default", kobjs)
	checkHA(t, what, cobjs)
	kdep, cdep := deploymentOf(t, "config/default", kobjs), deploymentOf(t, what, cobjs)
	kpod, cpod := kdep.Spec.Template.Spec.DeepCopy(), cdep.Spec.Template.Spec.DeepCopy()
	for _, p := range []*corev1.PodSpec{kpod, cpod} {
		for i := range p.TopologySpreadConstraints {
			p.TopologySpreadConstraints[i].LabelSelector = nil // checked by checkHA
		}
	}
	if !reflect.DeepEqual(kpod, cpod) {
		kc, cc := kpod.Containers[0], cpod.Containers[0]
		t.Errorf("config/default's manager pod differs from the chart's:\n  kustomize args %q\n  chart args     %q\n  kustomize %+v\n  chart     %+v", kc.Args, cc.Args, kpod, cpod)
	}
}

func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// TestInstallHelmChartPodValues installs the chart with the values users
// expect of a chart (ServiceAccount annotations, extra env, volumes and
// mounts, an image digest, topology spread) into a real API server, and
// reads back from the server that each landed where it should.
func TestInstallHelmChartPodValues(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	what, objs := helmTemplate(t, env, helm, "--include-crds",
		"--set", "image.repository=registry.example.com/rekey",
		"--set", "image.tag=ignored",
		"--set", "image.digest="+digest,
		"--set", `serviceAccount.annotations.iam\.gke\.io/gcp-service-account=rekey@example.iam.gserviceaccount.com`,
		"--set", "extraEnv[0].name=HTTPS_PROXY", "--set", "extraEnv[0].value=http://proxy.example.com:3128",
		"--set", "extraVolumes[0].name=ca", "--set", "extraVolumes[0].configMap.name=corporate-ca",
		"--set", "extraVolumeMounts[0].name=ca", "--set", "extraVolumeMounts[0].mountPath=/etc/corporate-ca",
		"--set", "extraVolumeMounts[0].readOnly=true",
		"--set", "topologySpreadConstraints[0].maxSkew=1",
		"--set", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
		"--set", "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule")
	checkManagerPod(t, what, objs)

	k := newCluster(t)
	k.install(t, what, objs, operatorNamespace)
	k.checkPresent(t, what, objs)
	ctx := context.Background()
	dep := &appsv1.Deployment{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: managerName}, dep); err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if want := "registry.example.com/rekey@" + digest; c.Image != want {
		t.Errorf("image %q, want %q (the digest, not the tag)", c.Image, want)
	}
	sa := &corev1.ServiceAccount{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: pod.ServiceAccountName}, sa); err != nil {
		t.Fatal(err)
	}
	if got := sa.Annotations["iam.gke.io/gcp-service-account"]; got != "rekey@example.iam.gserviceaccount.com" {
		t.Errorf("ServiceAccount %s annotations %v, want iam.gke.io/gcp-service-account", sa.Name, sa.Annotations)
	}
	env2 := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env2[e.Name] = e
	}
	if env2["HTTPS_PROXY"].Value != "http://proxy.example.com:3128" || env2["POD_NAMESPACE"].ValueFrom == nil {
		t.Errorf("container env %+v, want HTTPS_PROXY beside the chart's POD_NAMESPACE", c.Env)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "ca" && m.MountPath == "/etc/corporate-ca" && m.ReadOnly)
	}
	hasVolume := false
	for _, v := range pod.Volumes {
		hasVolume = hasVolume || (v.Name == "ca" && v.ConfigMap != nil && v.ConfigMap.Name == "corporate-ca")
	}
	if !mounted || !hasVolume || len(pod.Volumes) != 2 {
		t.Errorf("volumes %+v, mounts %+v: want ceph-work and the ConfigMap corporate-ca mounted read-only at /etc/corporate-ca", pod.Volumes, c.VolumeMounts)
	}
	// The given constraint replaces the default, and gets the release's
	// selector since it names none.
	if len(pod.TopologySpreadConstraints) != 1 {
		t.Fatalf("topologySpreadConstraints %+v, want the one given", pod.TopologySpreadConstraints)
	}
	ts := pod.TopologySpreadConstraints[0]
	sel, err := metav1.LabelSelectorAsSelector(ts.LabelSelector)
	if ts.TopologyKey != "topology.kubernetes.io/zone" || ts.WhenUnsatisfiable != corev1.DoNotSchedule || err != nil ||
		!sel.Matches(labels.Set(dep.Spec.Template.Labels)) || sel.Matches(labels.Set{"app.kubernetes.io/name": "rekey", "app.kubernetes.io/instance": "other"}) {
		t.Errorf("topology spread %+v: want the zone, DoNotSchedule, selecting this release's manager pods only (%v)", ts, err)
	}

	// Off: [] renders no spread at all.
	what, objs = helmTemplate(t, env, helm, "--set-json", "topologySpreadConstraints=[]")
	if s := deploymentOf(t, what, objs).Spec.Template.Spec.TopologySpreadConstraints; len(s) != 0 {
		t.Errorf("%s: topologySpreadConstraints %+v, want none", what, s)
	}
}
