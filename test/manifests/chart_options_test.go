package manifests

// The chart's optional values, rendered by the pinned helm: each renders
// what it promises, and nothing when off.

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
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

// TestHelmChartDefaultsRenderNoOptionalObjects: with the defaults (two
// replicas, no monitor) the chart renders no monitoring.coreos.com object
// (the prometheus-operator CRDs may not exist), and a PodDisruptionBudget
// keeping one of the two; with one replica (or none) no PodDisruptionBudget
// (minAvailable 1 of 1 would block every drain).
func TestHelmChartDefaultsRenderNoOptionalObjects(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	for _, set := range [][]string{nil, {"--set", "replicas=1"}, {"--set", "replicas=0"}} {
		what, objs := helmTemplate(t, env, helm, set...)
		for _, o := range objs {
			if (o.GetKind() == "PodDisruptionBudget" && set != nil) || strings.HasPrefix(o.GetAPIVersion(), "monitoring.coreos.com/") {
				t.Errorf("%s renders %s", what, describe(o))
			}
		}
		if set == nil {
			deps, pdbs := ofKind(objs, "Deployment"), ofKind(objs, "PodDisruptionBudget")
			if len(deps) != 1 || len(pdbs) != 1 {
				t.Fatalf("%s renders %d Deployments and %d PodDisruptionBudgets, want 1 and 1", what, len(deps), len(pdbs))
			}
			if n, _, _ := unstructured.NestedInt64(deps[0].Object, "spec", "replicas"); n != 2 {
				t.Errorf("%s: replicas %d, want 2 (a standby takes over from a stopped leader)", what, n)
			}
			if m, _, _ := unstructured.NestedFieldNoCopy(pdbs[0].Object, "spec", "minAvailable"); m != int64(1) {
				t.Errorf("%s: the PodDisruptionBudget keeps %v, want 1", what, m)
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
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "rekey-controller-manager"}, dep); err != nil {
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
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "rekey-controller-manager"}, pdb); err != nil {
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
