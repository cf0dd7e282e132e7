package manifests

import (
	"regexp"
	"strings"
	"testing"

	"rekey.io/rekey/internal/testenv"
)

// TestQuickstartManifests: what docs/quickstart.md tells a newcomer to
// apply is accepted by a real API server with the chart installed as the
// quick start installs it — the MySQL server, the application and the
// CredentialSet, with the CRD's validation and the chart's admission
// policies — and the names its commands use are the chart's. (Loading the
// image into kind and the rotation itself are not run here: no container
// runtime runs on the machines these tests run on.)
func TestQuickstartManifests(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	doc := string(readFile(t, "docs/quickstart.md"))

	chart := unstructuredObjects(t, "helm template", runTool(t, env, helm, "template", "rekey", chartDir,
		"--namespace", operatorNamespace, "--include-crds", "--set", "image.repository=rekey", "--set", "image.tag=dev"))
	found := false
	for _, o := range chart {
		if o.GetKind() == "Deployment" && o.GetName() == "rekey-controller-manager" && o.GetNamespace() == operatorNamespace {
			for _, c := range managerContainers(o) {
				found = found || c == "manager"
			}
		}
	}
	if !found {
		t.Error("the chart has no Deployment rekey-system/rekey-controller-manager with a container manager, which the quick start's commands name")
	}
	for _, cmd := range []string{"deployment/rekey-controller-manager", "manager=rekey:dev"} {
		if !strings.Contains(doc, cmd) {
			t.Errorf("docs/quickstart.md no longer says %q: update this test with it", cmd)
		}
	}

	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(doc, -1)
	if len(blocks) != 2 {
		t.Fatalf("docs/quickstart.md has %d yaml blocks, want 2 (the MySQL server and application, the CredentialSet)", len(blocks))
	}
	var objs = unstructuredObjects(t, "docs/quickstart.md", []byte(blocks[0][1]+"\n---\n"+blocks[1][1]))
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
	}
	for _, k := range []string{"Namespace", "Secret", "StatefulSet", "Deployment", "CredentialSet"} {
		if !kinds[k] {
			t.Errorf("docs/quickstart.md's manifests have no %s", k)
		}
	}

	k := newCluster(t)
	k.install(t, "helm template (quick start)", chart, operatorNamespace)
	k.install(t, "docs/quickstart.md", objs)
}

// managerContainers names the containers of Deployment o's pod template.
func managerContainers(o interface{ UnstructuredContent() map[string]any }) []string {
	var names []string
	spec, _ := o.UnstructuredContent()["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	cs, _ := pod["containers"].([]any)
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				names = append(names, n)
			}
		}
	}
	return names
}
