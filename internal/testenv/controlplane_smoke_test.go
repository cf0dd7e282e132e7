package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// These smoke tests prove the control plane the operator's tests run
// against: the pinned apiserver serves CRDs, and the full control plane
// really rolls StatefulSets and Deployments out on kwok's fake node.

const smokeTimeout = 3 * time.Minute

// eventually polls cond until it reports done, failing the test with the
// last state it described when the timeout passes. It returns how long it took.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (done bool, state string, err error)) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), smokeTimeout)
	defer cancel()
	start := time.Now()
	var state string
	for {
		done, s, err := cond(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		state = s
		if done {
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached in %s; last state: %s", what, smokeTimeout, state)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func TestAPIServerSmoke(t *testing.T) {
	start := time.Now()
	c := APIServerForTest(t, ControlPlaneOptions{})
	t.Logf("kube-apiserver %s up in %s", c.Version, time.Since(start).Round(time.Millisecond))
	ctx := context.Background()

	// The kubeconfig file is what a manager binary or kubectl-rekey gets.
	fromFile, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(fromFile)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := dc.ServerVersion(); err != nil || v.GitVersion != c.Version {
		t.Fatalf("version through %s = %v, %v; want %s", c.Kubeconfig, v, err, c.Version)
	}

	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.smoke.rekey.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "smoke.rekey.io",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size": {Type: "integer", Minimum: new(float64(1))},
						}},
						"status": {Type: "object", XPreserveUnknownFields: new(true)},
					},
				}},
			}},
		},
	}
	ax, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, "CRD Established", func(ctx context.Context) (bool, string, error) {
		got, err := ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("conditions %v", got.Status.Conditions), nil
	})
	t.Logf("CRD established in %s", took.Round(time.Millisecond))

	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "smoke.rekey.io", Version: "v1", Resource: "widgets"}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "smoke.rekey.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1"},
		"spec":     map[string]any{"size": int64(3)},
	}}
	if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(gvr).Namespace("default").Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 3 {
		t.Fatalf("widget spec.size = %d, want 3", size)
	}
	// The schema is enforced: a real apiserver, not a fake.
	bad := w.DeepCopy()
	bad.SetName("w2")
	_ = unstructured.SetNestedField(bad.Object, int64(0), "spec", "size")
	if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, bad, metav1.CreateOptions{}); err == nil {
		t.Fatal("widget with spec.size 0 accepted despite minimum 1")
	}
}

func TestFullControlPlaneSmoke(t *testing.T) {
	start := time.Now()
	c := FullControlPlaneForTest(t, ControlPlaneOptions{})
	t.Logf("full control plane up in %s", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	kc := c.Clientset()
	const ns = "smoke"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "db"}
	if _, err := kc.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels,
			Ports: []corev1.ServicePort{{Name: "mysql", Port: 3306}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    new(int32(3)),
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template:    podTemplate(labels),
		},
	}
	if _, err := kc.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, "StatefulSet ready", stsRolledOut(kc, ns, "db", 3))
	t.Logf("StatefulSet 3/3 ready in %s", took.Round(time.Millisecond))

	patchTemplateAnnotation(t, kc, ns, "db", "rekey.io/smoke-rev", "2")
	took = eventually(t, "StatefulSet rolled to the new template", stsRolledOut(kc, ns, "db", 3))
	t.Logf("StatefulSet template change rolled through in %s", took.Round(time.Millisecond))

	t.Run("hold and release readiness", func(t *testing.T) {
		// A held template stops the rolling update at the first pod it recreates.
		patchTemplateAnnotation(t, kc, ns, "db", HoldReadyAnnotation, "true")
		eventually(t, "db-2 recreated and held not ready", func(ctx context.Context) (bool, string, error) {
			p, err := kc.CoreV1().Pods(ns).Get(ctx, "db-2", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			_, held := p.Annotations[HoldReadyAnnotation]
			return held && p.Status.Phase == corev1.PodRunning && !podReady(p), fmt.Sprintf("phase %s ready %v held %v", p.Status.Phase, podReady(p), held), nil
		})
		time.Sleep(3 * time.Second) // the hold must last, not merely be slow
		s, err := kc.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Status.UpdatedReplicas != 1 || s.Status.CurrentRevision == s.Status.UpdateRevision {
			t.Fatalf("rollout not held at db-2: updated %d, current %s, update %s", s.Status.UpdatedReplicas, s.Status.CurrentRevision, s.Status.UpdateRevision)
		}
		t.Logf("rollout held at db-2: updated %d ready %d", s.Status.UpdatedReplicas, s.Status.ReadyReplicas)
		// Releasing each recreated pod lets the rollout take the next step.
		for _, pod := range []string{"db-2", "db-1", "db-0"} {
			eventually(t, pod+" recreated with the hold", func(ctx context.Context) (bool, string, error) {
				p, err := kc.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				_, held := p.Annotations[HoldReadyAnnotation]
				return held && p.Status.Phase == corev1.PodRunning, fmt.Sprintf("held %v phase %s", held, p.Status.Phase), nil
			})
			if err := c.ReleasePodReady(ctx, ns, pod); err != nil {
				t.Fatal(err)
			}
		}
		took := eventually(t, "released rollout finished", stsRolledOut(kc, ns, "db", 3))
		t.Logf("released rollout finished in %s", took.Round(time.Millisecond))

		// A Ready pod that gets the annotation turns not Ready, as if its probe failed.
		if err := c.HoldPodReady(ctx, ns, "db-1"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "readyReplicas 2 with db-1 held", stsReady(kc, ns, "db", 2))
		if err := c.ReleasePodReady(ctx, ns, "db-1"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "readyReplicas 3 after release", stsReady(kc, ns, "db", 3))
	})

	t.Run("ready delay", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "slow", Annotations: map[string]string{ReadyDelayAnnotation: "3s"}},
			Spec: podTemplate(nil).Spec}
		created := time.Now()
		if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		took := eventually(t, "delayed pod ready", func(ctx context.Context) (bool, string, error) {
			p, err := kc.CoreV1().Pods(ns).Get(ctx, "slow", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return podReady(p), string(p.Status.Phase), nil
		})
		if since := time.Since(created); since < 3*time.Second {
			t.Fatalf("pod with a 3s ready delay was ready after %s", since)
		}
		t.Logf("pod with a 3s ready delay ready after %s", took.Round(time.Millisecond))
	})

	t.Run("deployment", func(t *testing.T) {
		web := map[string]string{"app": "web"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       appsv1.DeploymentSpec{Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: web}, Template: podTemplate(web)},
		}
		if _, err := kc.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		took := eventually(t, "Deployment available", func(ctx context.Context) (bool, string, error) {
			d, err := kc.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			st := d.Status
			return st.ObservedGeneration >= d.Generation && st.AvailableReplicas == 2 && st.UpdatedReplicas == 2,
				fmt.Sprintf("%+v", st), nil
		})
		t.Logf("Deployment 2/2 available in %s", took.Round(time.Millisecond))
	})
}

func podTemplate(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			// Never pulled: kwok runs no containers.
			Name: "main", Image: "registry.invalid/rekey-smoke:1",
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(3306)}}},
		}}},
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// stsRolledOut: every replica runs the current template and is ready.
func stsRolledOut(kc kubernetes.Interface, ns, name string, replicas int32) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		s, err := kc.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		st := s.Status
		done := st.ObservedGeneration >= s.Generation && st.ReadyReplicas == replicas &&
			st.UpdatedReplicas == replicas && st.CurrentRevision == st.UpdateRevision
		return done, fmt.Sprintf("observed %d/%d ready %d updated %d current %s update %s",
			st.ObservedGeneration, s.Generation, st.ReadyReplicas, st.UpdatedReplicas, st.CurrentRevision, st.UpdateRevision), nil
	}
}

func stsReady(kc kubernetes.Interface, ns, name string, ready int32) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		s, err := kc.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return s.Status.ReadyReplicas == ready, fmt.Sprintf("ready %d", s.Status.ReadyReplicas), nil
	}
}

func patchTemplateAnnotation(t *testing.T, kc kubernetes.Interface, ns, name, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, key, value)
	if _, err := kc.AppsV1().StatefulSets(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
