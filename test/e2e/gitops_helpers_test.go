package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// The GitOps tool TestGitOps plays: its manifests, syncs and checks.

// gitRepo holds the manifests a GitOps tool applies for one set: the
// CredentialSet and its consumer Deployment, as a user commits them.
type gitRepo struct {
	t         *testing.T
	ns, name  string
	app       string
	set       *v1.CredentialSet
	consumers *appsv1.Deployment
}

// newGitRepo prepares what the platform provides outside git (the MySQL
// admin and its Secrets) and the two manifests.
func newGitRepo(t *testing.T, ns, name string, c *testenv.MySQLCluster) *gitRepo {
	g := &gitRepo{t: t, ns: ns, name: name, app: name + "-app"}
	g.set = appUserSet(t, ns, name, c)
	g.set.TypeMeta = metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet"}
	g.set.Spec.Consumers = []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: g.app}}
	labels := map[string]string{"app": g.app}
	g.consumers = &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: g.app},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(consumerReplicas)),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromString("100%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeName: cp.NodeName,
					Containers: []corev1.Container{{Name: "app", Image: consumerImage,
						EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: g.set.Spec.Distribution[0].Name}}}}}},
				},
			},
		},
	}
	return g
}

// manifest is obj as it sits in git: no status, no server-set metadata.
func (g *gitRepo) manifest(obj any) *unstructured.Unstructured {
	b, err := json.Marshal(obj)
	if err != nil {
		g.t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(b, &u.Object); err != nil {
		g.t.Fatal(err)
	}
	delete(u.Object, "status")
	pruneNulls(u.Object)
	return u
}

// pruneNulls drops null values (creationTimestamp and the like) that a
// hand-written manifest would not have.
func pruneNulls(m map[string]any) {
	for k, v := range m {
		switch vv := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			pruneNulls(vv)
			if len(vv) == 0 {
				delete(m, k)
			}
		case []any:
			for _, e := range vv {
				if em, ok := e.(map[string]any); ok {
					pruneNulls(em)
				}
			}
		}
	}
}

func (g *gitRepo) setManifest(keygen, discardgen int64) *unstructured.Unstructured {
	s := g.set.DeepCopy()
	s.Spec.Rotation = v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: ptr.To(keygen)}
	if discardgen > 0 {
		s.Spec.Rotation.DiscardGeneration = ptr.To(discardgen)
	}
	return g.manifest(s)
}

// sync server-side applies both manifests, forcing, as the GitOps tool.
func (g *gitRepo) sync(keygen, discardgen int64) {
	g.t.Helper()
	for _, u := range []*unstructured.Unstructured{g.setManifest(keygen, discardgen), g.manifest(g.consumers)} {
		if err := k8s.Apply(ctxT(g.t), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(argoManager), client.ForceOwnership); err != nil {
			g.t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// fluxSync syncs as Flux's kustomize-controller does: it first renames
// the managed-fields entries of managers whose name starts with "kubectl"
// (and "before-first-apply") to its own apply entry, taking their fields
// over, then server-side applies, forcing.
func (g *gitRepo) fluxSync(keygen, discardgen int64) {
	g.t.Helper()
	const flux = "kustomize-controller"
	for _, u := range []*unstructured.Unstructured{g.setManifest(keygen, discardgen), g.manifest(g.consumers)} {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		if err := k8s.Get(ctxT(g.t), client.ObjectKeyFromObject(u), live); err != nil {
			g.t.Fatal(err)
		}
		entries := live.GetManagedFields()
		renamed := false
		for i, e := range entries {
			if e.Subresource == "" && (strings.HasPrefix(e.Manager, "kubectl") || e.Manager == "before-first-apply" && e.Operation == metav1.ManagedFieldsOperationUpdate) {
				entries[i].Manager, entries[i].Operation, renamed = flux, metav1.ManagedFieldsOperationApply, true
			}
		}
		if renamed {
			body, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/metadata/managedFields", "value": entries}})
			if err := k8s.Patch(ctxT(g.t), live, client.RawPatch(types.JSONPatchType, body), client.FieldOwner(flux)); err != nil {
				g.t.Fatalf("take over fields of %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
		if err := k8s.Apply(ctxT(g.t), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(flux), client.ForceOwnership); err != nil {
			g.t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// replace PUTs the Deployment manifest, as kubectl replace does, with
// extra pod-template annotations.
func (g *gitRepo) replace(extra map[string]string) {
	g.t.Helper()
	d := g.consumers.DeepCopy()
	if len(extra) > 0 {
		d.Spec.Template.Annotations = extra
	}
	u := g.manifest(d)
	if err := k8s.Update(ctxT(g.t), u, client.FieldOwner(argoManager)); err != nil {
		g.t.Fatalf("replace Deployment %s: %v", g.app, err)
	}
}

// pluginAnnotate asks as kubectl rekey does: a merge patch of the set's
// annotations under the plugin's field manager.
func (g *gitRepo) pluginAnnotate(key, value string) { g.annotateAs(pluginManager, key, value) }

// annotateAs writes one annotation on the set as field manager manager.
func (g *gitRepo) annotateAs(manager, key, value string) {
	g.t.Helper()
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: g.name}}
	if err := k8s.Patch(ctxT(g.t), cs, client.RawPatch(types.MergePatchType, body), client.FieldOwner(manager)); err != nil {
		g.t.Fatal(err)
	}
}

func (g *gitRepo) deployment() *appsv1.Deployment {
	g.t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctxT(g.t), client.ObjectKey{Namespace: g.ns, Name: g.app}, d); err != nil {
		g.t.Fatal(err)
	}
	return d
}

func (g *gitRepo) waitRolledOut() *appsv1.Deployment {
	g.t.Helper()
	return g.waitRestartedWith("", "")
}

// waitRestartedWith waits until the Deployment's template carries
// key=value (key "": any template) and its rollout has finished.
func (g *gitRepo) waitRestartedWith(key, value string) *appsv1.Deployment {
	g.t.Helper()
	var d *appsv1.Deployment
	eventually(g.t, 2*time.Minute, fmt.Sprintf("Deployment %s rolled out with %s=%s", g.app, key, value), func() (bool, string) {
		d = g.deployment()
		ro := engine.DeploymentRollout(d)
		got := d.Spec.Template.Annotations[key]
		return (key == "" || got == value) && ro.Done && revision(d) > 0,
			fmt.Sprintf("annotation %q, generation %d, revision %d, rollout: %s", got, d.Generation, revision(d), ro.Message)
	})
	return d
}

// assertSyncChangesNothing re-applies the unchanged manifests and checks
// that rekey's annotation survives, the Deployment does not roll out again
// and the set's spec generation and status stay as they were.
func (g *gitRepo) assertSyncChangesNothing(what string, sync func(keygen, discardgen int64), keygen, discardgen int64, annKey, restart string, pc *podConsumers) {
	g.t.Helper()
	cs0 := waitObserved(g.t, g.ns, g.name)
	d0, starts := g.deployment(), pc.starts.Load()
	sync(keygen, discardgen)
	d := g.deployment()
	if got := d.Spec.Template.Annotations[annKey]; got != restart {
		g.t.Fatalf("%s removed or changed rekey's restart annotation: %q, want %q", what, got, restart)
	}
	if d.Generation != d0.Generation {
		g.t.Fatalf("%s changed the Deployment's spec: generation %d → %d", what, d0.Generation, d.Generation)
	}
	cs := waitObserved(g.t, g.ns, g.name)
	if cs.Generation != cs0.Generation {
		g.t.Fatalf("%s changed the set's spec: generation %d → %d", what, cs0.Generation, cs.Generation)
	}
	if a, b := statusSummary(cs0), statusSummary(cs); a != b {
		g.t.Fatalf("%s changed the set's status:\n before %s\n after  %s", what, a, b)
	}
	if n := pc.starts.Load() - starts; n != 0 {
		g.t.Fatalf("%s started %d consumer pods", what, n)
	}
	if got := g.deployment().Generation; got != d0.Generation {
		g.t.Fatalf("after %s the Deployment's spec moved: generation %d → %d", what, d0.Generation, got)
	}
	observed(g.t, "%s: annotation kept, no restart, status unchanged", what)
}

// statusSummary is what a sync must not move: the rotation's state.
func statusSummary(cs *v1.CredentialSet) string {
	st := cs.Status
	return fmt.Sprintf("phase=%s rotation=%q gen=%d target=%d last=%q restart=%q applied=%v/%v",
		st.Phase, st.RotationID, st.KeyGeneration, st.TargetGeneration, st.LastRotationID, st.RestartID, st.RotateApplied, st.DiscardApplied)
}

// revision is the Deployment controller's rollout count: it rises by one
// for every pod template it rolls out (a template it ran before included),
// which is what a restart of the consumer is. 0 until the controller wrote it.
func revision(d *appsv1.Deployment) int64 {
	var n int64
	fmt.Sscan(d.Annotations["deployment.kubernetes.io/revision"], &n)
	return n
}

// fieldOwner names the manager owning the pod-template annotation key.
func fieldOwner(d *appsv1.Deployment, key string) string {
	needle := `"f:` + key + `"`
	for _, mf := range d.ManagedFields {
		if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), needle) &&
			strings.Contains(string(mf.FieldsV1.Raw), `"f:template"`) {
			return mf.Manager
		}
	}
	return ""
}
